// DuckDB peer of bench_data: reads the same Parquet files into memory (a materialised SELECT of
// every column: CREATE TABLE AS) with DuckDB's own multi-threaded Parquet reader, and prints one
// JSON line with samples_per_s (the best of a few runs). The package comes from npm
// (@duckdb/node-api); the benchmark runs this only where node finds it.
//
//   NODE_PATH=.../node_modules node parquet_duckdb_peer.mjs --threads N [--seconds S] FILE...
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.NODE_PATH || process.cwd(), 'x.js'));
const { DuckDBInstance } = await import(require.resolve('@duckdb/node-api'));

const args = process.argv.slice(2);
let threads = 1, seconds = 2;
const files = [];
for (let i = 0; i < args.length; ++i) {
  if (args[i] === '--threads') threads = Number(args[++i]);
  else if (args[i] === '--seconds') seconds = Number(args[++i]);
  else files.push(args[i]);
}
const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
await con.run(`SET threads = ${threads}`);
await con.run(`SET preserve_insertion_order = false`);
const list = files.map((f) => `'${f.replaceAll("'", "''")}'`).join(', ');
let best = 0, rows = 0;
const start = Date.now();
do {
  const t0 = process.hrtime.bigint();
  await con.run(`CREATE OR REPLACE TABLE t AS SELECT * FROM read_parquet([${list}])`);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const r = await con.runAndReadAll('SELECT count(*) FROM t');
  rows = Number(r.getRows()[0][0]);
  best = Math.max(best, rows / s);
  await con.run('DROP TABLE t');
} while ((Date.now() - start) / 1000 < seconds);
console.log(JSON.stringify({ samples_per_s: best, rows, threads }));
