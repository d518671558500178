// `ember plot RUN_DIR`: draws the losses and AUCs a training run wrote to RUN_DIR/metrics.csv
// (rows "iteration,phase,metric,value") as RUN_DIR/metrics.png.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "ember/cli/chart.hpp"
#include "ember/cli/commands.hpp"
#include "ember/core/error.hpp"

namespace ember::cli {

namespace {

struct Options {
  std::string run_dir;
  std::string out;
};

using SeriesMap = std::map<std::string, std::vector<std::pair<double, double>>>;

SeriesMap read_metrics(const std::filesystem::path& csv) {
  std::ifstream in(csv);
  if (!in) EMBER_THROW_AS(DataError, "ember plot: cannot open ", csv.string());
  std::string line;
  std::getline(in, line);
  if (line.rfind("iteration,phase,metric,value", 0) != 0) {
    EMBER_THROW_AS(DataError, "ember plot: ", csv.string(),
                   " does not start with the header 'iteration,phase,metric,value'");
  }
  SeriesMap series;
  std::size_t line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    std::stringstream fields(line);
    std::string iteration, phase, metric, value;
    if (!std::getline(fields, iteration, ',') || !std::getline(fields, phase, ',') ||
        !std::getline(fields, metric, ',') || !std::getline(fields, value)) {
      EMBER_THROW_AS(DataError, "ember plot: ", csv.string(), " line ", line_no,
                     " does not have four fields: '", line, "'");
    }
    try {
      series[phase + " " + metric].emplace_back(std::stod(iteration), std::stod(value));
    } catch (const std::exception&) {
      EMBER_THROW_AS(DataError, "ember plot: ", csv.string(), " line ", line_no,
                     " has a non-numeric iteration or value: '", line, "'");
    }
  }
  return series;
}

void run(const Options& options) {
  const std::filesystem::path dir(options.run_dir);
  const std::filesystem::path csv = dir / "metrics.csv";
  const SeriesMap series = read_metrics(csv);
  const std::uint32_t palette[] = {0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e, 0x9467bd, 0x8c564b};
  Panel loss{"Loss", "iteration", "loss", {}};
  Panel quality{"Evaluation", "iteration", "AUC", {}};
  Panel rate{"Learning rate", "iteration", "learning rate", {}};
  int color = 0;
  for (const auto& [name, points] : series) {
    Series s{name, points, palette[color++ % 6], name.rfind("eval", 0) == 0};
    if (name.find("AUC") != std::string::npos) {
      quality.series.push_back(s);
    } else if (name.find("lr") != std::string::npos) {
      rate.series.push_back(s);
    } else if (name.find("loss") != std::string::npos || name.find("Loss") != std::string::npos) {
      loss.series.push_back(s);
    }
  }
  std::vector<Panel> panels{loss, quality};
  if (!rate.series.empty()) panels.push_back(rate);
  const std::filesystem::path out = options.out.empty() ? dir / "metrics.png" : options.out;
  write_chart_png(panels, out);
  std::cout << "wrote " << out.string() << "\n";
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "plot", "Draw a training run's losses and AUCs (RUN_DIR/metrics.csv) as a PNG");
  cmd->add_option("run_dir", options->run_dir, "The run's directory (where metrics.csv is)")
      ->required();
  cmd->add_option("--out", options->out, "Output PNG (default RUN_DIR/metrics.png)");
  cmd->callback([options] { run(*options); });
}

}  // namespace ember::cli
