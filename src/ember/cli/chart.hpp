// Line charts rendered to PNG, for `ember plot`: panels stacked vertically, each with axes,
// "nice" ticks, labels and a legend. Text comes from a system TrueType font through FreeType
// (found with fontconfig), pixels go out through libpng.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace ember::cli {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), in x order
  std::uint32_t rgb = 0x1f77b4;
  bool markers = false;  // draw a dot at each point (for sparse series such as evaluations)
};

struct Panel {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
};

// True when this build can render charts (FreeType, fontconfig and libpng were found).
bool charts_available();

// Renders the panels one above the other and writes a PNG. Throws ember::Error on failure
// (no usable font, unwritable file) naming the path.
void write_chart_png(const std::vector<Panel>& panels, const std::filesystem::path& path,
                     int width = 1000, int panel_height = 420);

// Tick positions covering [lo, hi] with a 1-2-5 step, about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

}  // namespace ember::cli
