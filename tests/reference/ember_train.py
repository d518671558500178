#!/usr/bin/env python3
"""The Ember side of the reference check through the Python module (issue 17): the same run as
`ember train CONFIG --device D --set layers.data.source=S --set solver.max_iter=N
--export-initial RUN/initial --model-out RUN/final --run-dir RUN`, driven by ember.Session.

    ember_train.py --config FILE --device cpu|cuda --source LIST --iterations N --run DIR
                   [--set KEY=VALUE ...]
"""

import argparse
import json
import os

import ember


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--iterations", type=int, required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a further override, as ember train --set takes it")
    args = ap.parse_args()
    overrides = {"layers.data.source": args.source, "solver.max_iter": args.iterations}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--set {item}: expected KEY=VALUE")
        # As `ember train --set` reads a value: JSON where it parses (true, 1024, [0]), else text.
        try:
            overrides[key] = json.loads(value)
        except ValueError:
            overrides[key] = value
    session = ember.Session(args.config, device=args.device, run_dir=args.run, set=overrides)
    session.save(os.path.join(args.run, "initial"))
    print(f"initial model written to {os.path.join(args.run, 'initial')}")
    result = session.fit()
    session.save(os.path.join(args.run, "final"))
    print(f"model saved to {os.path.join(args.run, 'final')}")
    print(f"done iter={result['iterations']} loss={result['loss']}")


if __name__ == "__main__":
    main()
