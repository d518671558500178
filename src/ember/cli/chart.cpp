#include "ember/cli/chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "ember/core/error.hpp"

#if EMBER_WITH_CHARTS
#include <fontconfig/fontconfig.h>
#include <ft2build.h>
#include <png.h>
#include FT_FREETYPE_H
#endif

namespace ember::cli {

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

#if EMBER_WITH_CHARTS

namespace {

struct Rgb {
  std::uint8_t r, g, b;
};
Rgb rgb_of(std::uint32_t c) {
  return {static_cast<std::uint8_t>(c >> 16), static_cast<std::uint8_t>(c >> 8),
          static_cast<std::uint8_t>(c)};
}

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(static_cast<std::size_t>(w) * h * 3, 255) {}
  int width() const { return w_; }
  int height() const { return h_; }
  const std::uint8_t* row(int y) const { return &px_[static_cast<std::size_t>(y) * w_ * 3]; }

  void blend(int x, int y, Rgb c, float alpha) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_ || alpha <= 0) return;
    alpha = std::min(alpha, 1.0f);
    std::uint8_t* p = &px_[(static_cast<std::size_t>(y) * w_ + x) * 3];
    p[0] = static_cast<std::uint8_t>(p[0] + (c.r - p[0]) * alpha + 0.5f);
    p[1] = static_cast<std::uint8_t>(p[1] + (c.g - p[1]) * alpha + 0.5f);
    p[2] = static_cast<std::uint8_t>(p[2] + (c.b - p[2]) * alpha + 0.5f);
  }

  void fill_rect(int x0, int y0, int x1, int y1, Rgb c) {
    for (int y = std::max(0, y0); y < std::min(h_, y1); ++y) {
      for (int x = std::max(0, x0); x < std::min(w_, x1); ++x)
        blend(x, y, c, 1.0f);
    }
  }

  // An anti-aliased segment of the given width: every pixel's coverage is its distance to the
  // segment against the half width.
  void line(double x0, double y0, double x1, double y1, Rgb c, double width) {
    const double r = width / 2;
    const int bx0 = static_cast<int>(std::floor(std::min(x0, x1) - r - 1));
    const int bx1 = static_cast<int>(std::ceil(std::max(x0, x1) + r + 1));
    const int by0 = static_cast<int>(std::floor(std::min(y0, y1) - r - 1));
    const int by1 = static_cast<int>(std::ceil(std::max(y0, y1) + r + 1));
    const double dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy;
    for (int y = std::max(0, by0); y <= std::min(h_ - 1, by1); ++y) {
      for (int x = std::max(0, bx0); x <= std::min(w_ - 1, bx1); ++x) {
        const double px = x + 0.5 - x0, py = y + 0.5 - y0;
        const double t = len2 > 0 ? std::clamp((px * dx + py * dy) / len2, 0.0, 1.0) : 0.0;
        const double ex = px - t * dx, ey = py - t * dy;
        const double d = std::sqrt(ex * ex + ey * ey);
        blend(x, y, c, static_cast<float>(std::clamp(r + 0.5 - d, 0.0, 1.0)));
      }
    }
  }

  void dot(double x, double y, Rgb c, double radius) { line(x, y, x, y, c, 2 * radius); }

 private:
  int w_, h_;
  std::vector<std::uint8_t> px_;
};

std::string find_font() {
  std::string path;
  if (FcInit()) {
    FcPattern* pattern = FcNameParse(reinterpret_cast<const FcChar8*>("sans-serif"));
    FcConfigSubstitute(nullptr, pattern, FcMatchPattern);
    FcDefaultSubstitute(pattern);
    FcResult result;
    FcPattern* match = FcFontMatch(nullptr, pattern, &result);
    FcChar8* file = nullptr;
    if (match != nullptr && FcPatternGetString(match, FC_FILE, 0, &file) == FcResultMatch) {
      path = reinterpret_cast<const char*>(file);
    }
    if (match != nullptr) FcPatternDestroy(match);
    FcPatternDestroy(pattern);
  }
  if (path.empty()) {
    for (const char* candidate : {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                                  "/usr/share/fonts/dejavu/DejaVuSans.ttf"}) {
      if (std::filesystem::exists(candidate)) return candidate;
    }
  }
  return path;
}

class TextRenderer {
 public:
  TextRenderer() {
    const std::string font = find_font();
    if (font.empty()) EMBER_THROW("ember plot: no TrueType font found (install fonts-dejavu-core)");
    if (FT_Init_FreeType(&library_) != 0) EMBER_THROW("ember plot: FreeType failed to start");
    if (FT_New_Face(library_, font.c_str(), 0, &face_) != 0) {
      FT_Done_FreeType(library_);
      EMBER_THROW("ember plot: cannot load the font ", font);
    }
  }
  ~TextRenderer() {
    FT_Done_Face(face_);
    FT_Done_FreeType(library_);
  }
  TextRenderer(const TextRenderer&) = delete;
  TextRenderer& operator=(const TextRenderer&) = delete;

  int measure(const std::string& text, int size) {
    FT_Set_Pixel_Sizes(face_, 0, static_cast<FT_UInt>(size));
    int width = 0;
    for (unsigned char ch : text) {
      if (FT_Load_Char(face_, ch, FT_LOAD_DEFAULT) == 0)
        width += static_cast<int>(face_->glyph->advance.x >> 6);
    }
    return width;
  }

  // Draws `text` with its baseline's left end at (x, y); rotated 90 degrees counter-clockwise
  // (reading bottom to top) when `vertical`, with (x, y) then the baseline's bottom end.
  void draw(Canvas& canvas, const std::string& text, int x, int y, int size, Rgb color,
            bool vertical = false) {
    FT_Set_Pixel_Sizes(face_, 0, static_cast<FT_UInt>(size));
    int pen = 0;
    for (unsigned char ch : text) {
      if (FT_Load_Char(face_, ch, FT_LOAD_RENDER) != 0) continue;
      const FT_GlyphSlot g = face_->glyph;
      const FT_Bitmap& bm = g->bitmap;
      for (unsigned r = 0; r < bm.rows; ++r) {
        for (unsigned c = 0; c < bm.width; ++c) {
          const float a = bm.buffer[r * static_cast<unsigned>(bm.pitch) + c] / 255.0f;
          const int gx = pen + g->bitmap_left + static_cast<int>(c);  // along the baseline
          const int gy = static_cast<int>(r) - g->bitmap_top;         // below the baseline
          if (vertical) {
            canvas.blend(x + gy, y - gx, color, a);
          } else {
            canvas.blend(x + gx, y + gy, color, a);
          }
        }
      }
      pen += static_cast<int>(g->advance.x >> 6);
    }
  }

 private:
  FT_Library library_ = nullptr;
  FT_Face face_ = nullptr;
};

std::string format_tick(double v, double step) {
  char buf[32];
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.2g", v);
  } else {
    const int decimals =
        step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  }
  return buf;
}

void draw_panel(Canvas& canvas, TextRenderer& text, const Panel& panel, int top, int height) {
  const Rgb ink{40, 40, 40}, grid{225, 225, 225};
  const int left = 90, right = canvas.width() - 30, plot_top = top + 40,
            plot_bottom = top + height - 60;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const Series& s : panel.series) {
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  }
  text.draw(canvas, panel.title, left, top + 26, 18, ink);
  if (!std::isfinite(x_lo)) {
    text.draw(canvas, "(no data)", left + 20, (plot_top + plot_bottom) / 2, 14, ink);
    return;
  }
  if (x_hi == x_lo) x_lo -= 1, x_hi += 1;
  if (y_hi == y_lo) {  // a constant series: a band around its value, scaled to it
    const double d = y_hi != 0 ? std::fabs(y_hi) * 0.1 : 0.5;
    y_lo -= d, y_hi += d;
  }
  const double pad = (y_hi - y_lo) * 0.05;
  y_lo -= pad, y_hi += pad;
  const auto xs = nice_ticks(x_lo, x_hi), ys = nice_ticks(y_lo, y_hi);
  auto to_x = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * (right - left); };
  auto to_y = [&](double y) {
    return plot_bottom - (y - y_lo) / (y_hi - y_lo) * (plot_bottom - plot_top);
  };
  const double xstep = xs.size() > 1 ? xs[1] - xs[0] : 1, ystep = ys.size() > 1 ? ys[1] - ys[0] : 1;
  for (double t : ys) {
    const double py = to_y(t);
    canvas.line(left, py, right, py, grid, 1);
    const std::string label = format_tick(t, ystep);
    text.draw(canvas, label, left - 8 - text.measure(label, 12), static_cast<int>(py) + 4, 12, ink);
  }
  for (double t : xs) {
    const double px = to_x(t);
    canvas.line(px, plot_top, px, plot_bottom, grid, 1);
    const std::string label = format_tick(t, xstep);
    text.draw(canvas, label, static_cast<int>(px) - text.measure(label, 12) / 2, plot_bottom + 18,
              12, ink);
  }
  canvas.line(left, plot_bottom, right, plot_bottom, ink, 1.2);
  canvas.line(left, plot_top, left, plot_bottom, ink, 1.2);
  text.draw(canvas, panel.x_label, (left + right - text.measure(panel.x_label, 13)) / 2,
            plot_bottom + 42, 13, ink);
  text.draw(canvas, panel.y_label, 24,
            (plot_top + plot_bottom + text.measure(panel.y_label, 13)) / 2, 13, ink,
            /*vertical=*/true);
  int legend_y = plot_top + 6;
  for (const Series& s : panel.series) {
    const Rgb c = rgb_of(s.rgb);
    for (std::size_t i = 1; i < s.points.size(); ++i) {
      canvas.line(to_x(s.points[i - 1].first), to_y(s.points[i - 1].second),
                  to_x(s.points[i].first), to_y(s.points[i].second), c, 2.0);
    }
    if (s.markers || s.points.size() == 1) {
      for (auto [x, y] : s.points)
        canvas.dot(to_x(x), to_y(y), c, 3.5);
    }
    const int lx = right - 170;
    canvas.line(lx, legend_y + 6, lx + 24, legend_y + 6, c, 3);
    text.draw(canvas, s.name, lx + 32, legend_y + 11, 12, ink);
    legend_y += 18;
  }
}

}  // namespace

bool charts_available() {
  return true;
}

void write_chart_png(const std::vector<Panel>& panels, const std::filesystem::path& path, int width,
                     int panel_height) {
  EMBER_CHECK(!panels.empty(), "ember plot: nothing to draw");
  Canvas canvas(width, panel_height * static_cast<int>(panels.size()));
  TextRenderer text;
  for (std::size_t i = 0; i < panels.size(); ++i) {
    draw_panel(canvas, text, panels[i], static_cast<int>(i) * panel_height, panel_height);
  }
  const std::filesystem::path tmp = path.string() + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) EMBER_THROW("ember plot: cannot write ", tmp.string());
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png != nullptr ? png_create_info_struct(png) : nullptr;
  if (png == nullptr || info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    std::filesystem::remove(tmp);
    EMBER_THROW("ember plot: libpng failed writing ", path.string());
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, static_cast<png_uint_32>(canvas.width()),
               static_cast<png_uint_32>(canvas.height()), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < canvas.height(); ++y)
    png_write_row(png, canvas.row(y));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fclose(f) != 0) EMBER_THROW("ember plot: cannot finish writing ", tmp.string());
  std::filesystem::rename(tmp, path);
}

#else

bool charts_available() {
  return false;
}

void write_chart_png(const std::vector<Panel>&, const std::filesystem::path& path, int, int) {
  EMBER_THROW(
      "ember plot: this build has no chart support (FreeType, fontconfig and libpng "
      "were not found when it was configured); cannot write ",
      path.string());
}

#endif

}  // namespace ember::cli
