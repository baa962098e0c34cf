//! Log-log PNG line plots for the sweeps (one line per series), drawn with
//! `plotters`. Text needs a font: DejaVu Sans from Debian's
//! `fonts-dejavu-core`, read once at run time.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Registers the font as "sans-serif" once; says why when it cannot.
fn font() -> Result<()> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let bytes = std::fs::read(FONT).map_err(|e| {
                format!("{FONT}: {e} (install Debian's fonts-dejavu-core for PNG plots)")
            })?;
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{FONT} is not a font plotters can read"))
        })
        .clone()
        .map_err(Into::into)
}

/// A named series of (x, y) points, both positive.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Writes `series` as a log-log line plot to `path`.
pub fn log_log(path: &Path, title: &str, x: &str, y: &str, series: &[Series]) -> Result<()> {
    font()?;
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (x_lo, x_hi) = bounds(all().map(|p| p.0)).ok_or("nothing to plot")?;
    let (y_lo, y_hi) = bounds(all().map(|p| p.1)).ok_or("nothing to plot")?;
    let root = BitMapBackend::new(path, (1000, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (x_lo / 1.2..x_hi * 1.2).log_scale(),
            (y_lo / 1.5..y_hi * 1.5).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc(x)
        .y_desc(y)
        .label_style(("sans-serif", 14))
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn bounds(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.filter(|v| *v > 0.0).fold(None, |b, v| match b {
        None => Some((v, v)),
        Some((lo, hi)) => Some((v.min(lo), v.max(hi))),
    })
}

/// How a scatter plot draws a group of points: small filled shapes, or
/// larger hollow ones that leave what lies under them visible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Circle,
    Square,
    Triangle,
    /// A triangle standing on its point.
    Wedge,
    Diamond,
    Ring,
    Frame,
    Cross,
}

/// A named group of scatter points, all of one shape and colour.
pub struct Marks {
    pub name: String,
    pub shape: Shape,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
}

/// Runs `$body` with `$make(at, color)` building `$shape`'s marker element
/// (each shape is its own element type, so one `match` arm each).
macro_rules! with_marker {
    ($shape:expr, $make:ident, $body:expr) => {
        match $shape {
            Shape::Circle => {
                let $make = |at, c: RGBColor| Circle::new(at, 3, c.filled());
                $body
            }
            Shape::Square => {
                let $make = |at, c: RGBColor| {
                    EmptyElement::at(at) + Rectangle::new([(-3, -3), (3, 3)], c.filled())
                };
                $body
            }
            Shape::Triangle => {
                let $make = |at, c: RGBColor| TriangleMarker::new(at, 4, c.filled());
                $body
            }
            Shape::Wedge => {
                let $make = |at, c: RGBColor| {
                    EmptyElement::at(at) + Polygon::new(vec![(-4, -3), (4, -3), (0, 4)], c.filled())
                };
                $body
            }
            Shape::Diamond => {
                let $make = |at, c: RGBColor| {
                    EmptyElement::at(at)
                        + Polygon::new(vec![(0, -4), (4, 0), (0, 4), (-4, 0)], c.filled())
                };
                $body
            }
            Shape::Ring => {
                let $make = |at, c: RGBColor| Circle::new(at, 7, c.stroke_width(2));
                $body
            }
            Shape::Frame => {
                let $make = |at, c: RGBColor| {
                    EmptyElement::at(at) + Rectangle::new([(-6, -6), (6, 6)], c.stroke_width(2))
                };
                $body
            }
            Shape::Cross => {
                let $make = |at, c: RGBColor| Cross::new(at, 6, c.stroke_width(2));
                $body
            }
        }
    };
}

/// Writes `marks` as a log-log scatter plot to `path`, the legend in a
/// panel to the right so it hides no points however many groups there are.
pub fn log_log_scatter(path: &Path, title: &str, x: &str, y: &str, marks: &[Marks]) -> Result<()> {
    font()?;
    let all = || marks.iter().flat_map(|m| m.points.iter());
    let (x_lo, x_hi) = bounds(all().map(|p| p.0)).ok_or("nothing to plot")?;
    let (y_lo, y_hi) = bounds(all().map(|p| p.1)).ok_or("nothing to plot")?;
    // Tall enough for a legend line per group.
    let height = 700.max(60 + 20 * marks.len() as u32);
    let root = BitMapBackend::new(path, (1250, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot_area, legend) = root.split_horizontally(960);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (x_lo / 1.5..x_hi * 1.5).log_scale(),
            (y_lo / 2.0..y_hi * 2.0).log_scale(),
        )?;
    let number = |v: &f64| {
        if *v >= 1.0 {
            format!("{v:.0}")
        } else {
            format!("{v}")
        }
    };
    chart
        .configure_mesh()
        .x_desc(x)
        .y_desc(y)
        .x_label_formatter(&number)
        .y_label_formatter(&number)
        .label_style(("sans-serif", 14))
        .draw()?;
    for m in marks {
        let points = m.points.iter().copied().filter(|p| p.0 > 0.0 && p.1 > 0.0);
        with_marker!(m.shape, make, {
            chart.draw_series(points.map(|at| make(at, m.color)))?;
        });
    }
    for (i, m) in marks.iter().enumerate() {
        let y = 50 + 20 * i as i32;
        with_marker!(m.shape, make, legend.draw(&make((14, y), m.color))?);
        let text = Text::new(m.name.as_str(), (30, y - 8), ("sans-serif", 14).into_font());
        legend.draw(&text)?;
    }
    root.present()?;
    Ok(())
}
