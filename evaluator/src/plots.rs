//! PNG plots of a result set (`DIR/plots/`), drawn with plotters and an embedded
//! DejaVu Sans font (Bitstream Vera license, `assets/DejaVuSans-LICENSE.txt`).

use crate::leaderboard::Leaderboard;
use crate::score::CaseScore;
use crate::EvalError;
use ground_truth::{Collectors, EdgeType, Mode};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

/// Plot file names written by [`write_plots`] (the last four: [`axes::AXIS_PLOTS`]).
pub const PLOTS: &[&str] = &[
    "pair_accuracy_by_family.png",
    "edge_f1_by_type.png",
    "loss_sweep.png",
    "case_heatmap.png",
    "accuracy_by_gating_depth.png",
    "accuracy_by_magnitude_ratio.png",
    "accuracy_by_peers.png",
    "accuracy_by_graph_nodes.png",
];

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded font is a valid TTF; a failure here would only mean no text.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// The plotters colour of profiler `name` (`palette`: derived from the name alone).
fn colour(name: &str) -> RGBColor {
    rgb(crate::palette::profiler_colour(name))
}

fn rgb(c: crate::palette::Colour) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}

fn font(size: u32) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

fn plot_err(path: &Path) -> impl Fn(String) -> EvalError + '_ {
    move |message| EvalError::Plot {
        path: path.to_path_buf(),
        message,
    }
}

macro_rules! tri {
    ($e:expr, $path:expr) => {
        $e.map_err(|e| $crate::plots::plot_err($path)(e.to_string()))?
    };
}

mod axes;
mod costs;
pub(crate) use costs::accuracy_vs_cost;

/// Approximate width in pixels of `s` at `size` (DejaVu Sans averages ~0.6 em).
fn text_width(s: &str, size: u32) -> u32 {
    (s.chars().count() as f64 * size as f64 * 0.6).ceil() as u32
}

/// Writes every plot into `dir/plots/`; returns the files written.
pub fn write_plots(
    dir: &Path,
    scores: &[CaseScore],
    lb: &Leaderboard,
) -> Result<Vec<PathBuf>, EvalError> {
    register_font();
    let plots = dir.join("plots");
    std::fs::create_dir_all(&plots).map_err(|source| EvalError::Io {
        path: plots.clone(),
        source,
    })?;
    let profilers = lb.profilers();
    let mut out = Vec::new();

    // Each view (collectors × mode) is a panel of its own: views are never pooled.
    let views = views_of(lb);

    // Pair accuracy by family, per view.
    let families: Vec<String> = lb
        .families
        .iter()
        .map(|f| f.family.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let family_panels = panels(&views, &families, &profilers, |fam, p, c, m| {
        lb.families
            .iter()
            .find(|f| {
                &f.family == fam && f.profiler == p && f.collectors == Some(c) && f.mode == Some(m)
            })
            .and_then(|f| f.pair_accuracy)
    });
    let p = plots.join(PLOTS[0]);
    grouped_hbar(
        &p,
        "Pair accuracy by family (loss-free views), one panel per view",
        "pair accuracy (every variant of a pair correct)",
        &families,
        &profilers,
        &family_panels,
    )?;
    out.push(p);

    // Edge F1 by type, per view (loss-free).
    let types: Vec<EdgeType> = EdgeType::ALL
        .iter()
        .copied()
        .filter(|t| lb.edge_types.iter().any(|r| r.kind == *t))
        .collect();
    let type_panels = panels(&views, &types, &profilers, |t: &EdgeType, p, c, m| {
        lb.edge_types
            .iter()
            .find(|r| {
                r.kind == *t && r.profiler == p && r.collectors == Some(c) && r.mode == Some(m)
            })
            .and_then(|r| r.f1)
    });
    let names: Vec<String> = types.iter().map(|t| t.as_str().to_string()).collect();
    let p = plots.join(PLOTS[1]);
    grouped_hbar(
        &p,
        "Edge F1 by edge type (loss-free views), one panel per view",
        "edge F1",
        &names,
        &profilers,
        &type_panels,
    )?;
    out.push(p);

    let p = plots.join(PLOTS[2]);
    loss_sweep(&p, lb, &profilers, &views)?;
    out.push(p);

    let p = plots.join(PLOTS[3]);
    case_heatmap(&p, scores, &profilers)?;
    out.push(p);

    // The per-axis curves leave the probes out: they are the floor, not contestants.
    let ranked: Vec<String> = profilers
        .iter()
        .filter(|p| !crate::leaderboard::is_probe(p))
        .cloned()
        .collect();
    for (file, axis, desc) in axes::AXIS_PLOTS {
        let p = plots.join(file);
        axes::axis_curve(&p, lb, axis, desc, &ranked)?;
        out.push(p);
    }
    Ok(out)
}

/// The views (collectors × mode) of the leaderboard's rows, in that order.
fn views_of(lb: &Leaderboard) -> Vec<(Collectors, Mode)> {
    lb.rows
        .iter()
        .map(|r| (r.collectors, r.mode))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn view_title(collectors: Collectors, mode: Mode) -> String {
    format!("view {}/{}", collectors.as_str(), mode.as_str())
}

/// One panel of a grouped bar chart: its title and, per category, one value per series.
struct Panel {
    title: String,
    values: Vec<Vec<Option<f64>>>,
}

/// One [`Panel`] per view: per category, the value of each profiler, from `value`.
fn panels<T>(
    views: &[(Collectors, Mode)],
    categories: &[T],
    profilers: &[String],
    value: impl Fn(&T, &str, Collectors, Mode) -> Option<f64>,
) -> Vec<Panel> {
    views
        .iter()
        .map(|&(c, m)| Panel {
            title: view_title(c, m),
            values: categories
                .iter()
                .map(|cat| profilers.iter().map(|p| value(cat, p, c, m)).collect())
                .collect(),
        })
        .collect()
}

/// Horizontal grouped bars, one panel per view: one group per category, one bar per
/// series, values in [0, 1].
fn grouped_hbar(
    path: &Path,
    title: &str,
    x_desc: &str,
    categories: &[String],
    series: &[String],
    panels: &[Panel],
) -> Result<(), EvalError> {
    let bar = 14u32;
    let group = (series.len().max(1) as u32) * bar + 12;
    let label_w = categories
        .iter()
        .map(|c| text_width(c, 14))
        .max()
        .unwrap_or(0)
        .max(60)
        + 16;
    let legend_h = 24 * ((series.len() as u32).div_ceil(4)).max(1);
    let width = 1100u32.max(label_w + 700);
    let panel_h = 90 + group * (categories.len().max(1) as u32);
    let height = 50 + legend_h + panel_h * (panels.len().max(1) as u32);
    let full = BitMapBackend::new(path, (width, height)).into_drawing_area();
    tri!(full.fill(&WHITE), path);
    let root = tri!(full.titled(title, font(20)), path);
    let (legend_area, mut rest) = root.split_vertically(legend_h);
    draw_legend(&legend_area, series, path)?;
    if panels.is_empty() {
        tri!(
            full.draw_text(
                "no data",
                &font(18).pos(Pos::new(HPos::Center, VPos::Center)),
                (width as i32 / 2, height as i32 / 2)
            ),
            path
        );
    }
    for panel in panels {
        let (chart_area, below) = rest.split_vertically(panel_h);
        rest = below;
        hbar_panel(
            &full,
            &chart_area,
            panel,
            x_desc,
            categories,
            series,
            label_w,
            path,
        )?;
    }
    tri!(full.present(), path);
    Ok(())
}

/// One panel of [`grouped_hbar`]; text is drawn on `full` at backend coordinates.
#[allow(clippy::too_many_arguments)]
fn hbar_panel(
    full: &DrawingArea<BitMapBackend<'_>, Shift>,
    chart_area: &DrawingArea<BitMapBackend<'_>, Shift>,
    panel: &Panel,
    x_desc: &str,
    categories: &[String],
    series: &[String],
    label_w: u32,
    path: &Path,
) -> Result<(), EvalError> {
    let values = &panel.values;
    let n = categories.len().max(1) as f64;
    let mut chart = tri!(
        ChartBuilder::on(chart_area)
            .margin_right(30)
            .margin_top(6)
            .caption(&panel.title, font(16))
            .x_label_area_size(44)
            .y_label_area_size(label_w)
            .build_cartesian_2d(0f64..1f64, 0f64..n),
        path
    );
    tri!(
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_labels(11)
            .x_desc(x_desc)
            .x_label_style(font(14))
            .axis_desc_style(font(15))
            .x_label_formatter(&|x| format!("{x:.1}"))
            .light_line_style(RGBColor(238, 238, 238))
            .draw(),
        path
    );
    if categories.is_empty() {
        let c = chart.backend_coord(&(0.5, n / 2.0));
        tri!(
            full.draw_text(
                "no data",
                &font(18).pos(Pos::new(HPos::Center, VPos::Center)),
                c
            ),
            path
        );
        return Ok(());
    }
    let unit = 1.0 / (series.len().max(1) as f64 + 0.8);
    for (ci, cat) in categories.iter().enumerate() {
        // Category ci occupies [n-ci-1, n-ci) so the first is at the top.
        let top = n - ci as f64;
        let (lx, ly) = chart.backend_coord(&(0.0, top - 0.5));
        tri!(
            full.draw_text(
                cat,
                &font(14).pos(Pos::new(HPos::Right, VPos::Center)),
                (lx - 8, ly)
            ),
            path
        );
        for (si, name) in series.iter().enumerate() {
            let y1 = top - 0.4 * unit - si as f64 * unit;
            let y0 = y1 - unit * 0.9;
            match values.get(ci).and_then(|v| v.get(si)).copied().flatten() {
                Some(v) => {
                    let v = v.clamp(0.0, 1.0);
                    tri!(
                        chart.draw_series(std::iter::once(Rectangle::new(
                            [(0.0, y0), (v, y1)],
                            colour(name).filled()
                        ))),
                        path
                    );
                    let (x, y) = chart.backend_coord(&(v, (y0 + y1) / 2.0));
                    tri!(
                        full.draw_text(
                            &format!("{v:.2}"),
                            &font(11).pos(Pos::new(HPos::Left, VPos::Center)),
                            (x + 4, y)
                        ),
                        path
                    );
                }
                None => {
                    let (x, y) = chart.backend_coord(&(0.0, (y0 + y1) / 2.0));
                    let style = font(11)
                        .color(&RGBColor(120, 120, 120))
                        .pos(Pos::new(HPos::Left, VPos::Center));
                    tri!(full.draw_text("n/a", &style, (x + 4, y)), path);
                }
            }
        }
    }
    Ok(())
}

/// A row of coloured squares with profiler names.
fn draw_legend(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    series: &[String],
    path: &Path,
) -> Result<(), EvalError> {
    let (w, _) = area.dim_in_pixel();
    let per_row = 4usize;
    let slot = (w as i32 - 40) / per_row as i32;
    for (i, s) in series.iter().enumerate() {
        let x = 20 + (i % per_row) as i32 * slot;
        let y = 4 + (i / per_row) as i32 * 24;
        tri!(
            area.draw(&Rectangle::new(
                [(x, y + 2), (x + 14, y + 16)],
                colour(s).filled()
            )),
            path
        );
        tri!(
            area.draw_text(
                s,
                &font(15).pos(Pos::new(HPos::Left, VPos::Top)),
                (x + 20, y + 1)
            ),
            path
        );
    }
    Ok(())
}

/// A chart whose x positions 0, 1, … are categories.
type CategoryChart<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The grid of a chart of rates in [0, 1] over categories: y labelled every 0.1, no
/// x labels of its own (see [`draw_categories`]).
fn draw_unit_mesh(
    chart: &mut CategoryChart<'_, '_>,
    x_desc: &str,
    y_desc: Option<&str>,
    path: &Path,
) -> Result<(), EvalError> {
    let mut mesh = chart.configure_mesh();
    mesh.x_labels(0)
        .disable_x_mesh()
        .y_labels(11)
        .y_label_formatter(&|y| format!("{y:.1}"))
        .y_label_style(font(13))
        .light_line_style(RGBColor(238, 238, 238))
        .x_desc(x_desc)
        .axis_desc_style(font(14));
    if let Some(d) = y_desc {
        mesh.y_desc(d);
    }
    tri!(mesh.draw(), path);
    Ok(())
}

/// Writes `labels` under the x positions 0, 1, … of `chart`, or `empty` across its
/// middle when there are none.
fn draw_categories(
    full: &DrawingArea<BitMapBackend<'_>, Shift>,
    chart: &CategoryChart<'_, '_>,
    labels: &[String],
    empty: &str,
    path: &Path,
) -> Result<(), EvalError> {
    for (i, label) in labels.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64, 0.0));
        tri!(
            full.draw_text(
                label,
                &font(13).pos(Pos::new(HPos::Center, VPos::Top)),
                (x, y + 6)
            ),
            path
        );
    }
    if labels.is_empty() {
        let (x, y) = chart.backend_coord(&(0.0, 0.5));
        tri!(
            full.draw_text(
                empty,
                &font(16).pos(Pos::new(HPos::Center, VPos::Center)),
                (x, y)
            ),
            path
        );
    }
    Ok(())
}

/// False-confidence rate and unresolved recall against loss rate, one line per
/// profiler, one row of two panels per view.
fn loss_sweep(
    path: &Path,
    lb: &Leaderboard,
    profilers: &[String],
    views: &[(Collectors, Mode)],
) -> Result<(), EvalError> {
    // Loss levels with a rate (targeted loss has none), in increasing order.
    let mut rates: Vec<f64> = lb.loss.iter().filter_map(|r| r.loss_rate).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let legend_h = 24 * ((profilers.len() as u32).div_ceil(4)).max(1);
    let row_h = 420u32;
    let height = 70 + legend_h + row_h * views.len().max(1) as u32;
    let full = BitMapBackend::new(path, (1300, height)).into_drawing_area();
    tri!(full.fill(&WHITE), path);
    let root = tri!(
        full.titled("Behaviour under record loss, one row per view", font(20)),
        path
    );
    let (legend_area, rest) = root.split_vertically(legend_h);
    draw_legend(&legend_area, profilers, path)?;
    let (mut rest, foot) = rest.split_vertically(rest.dim_in_pixel().1 - 24);
    let note =
        "A missing point: no symptom was unresolved at that loss rate (the rate is undefined).";
    tri!(
        foot.draw_text(note, &font(13).color(&RGBColor(90, 90, 90)), (20, 2)),
        path
    );
    let labels: Vec<String> = rates
        .iter()
        .map(|r| format!("{}%", (r * 100.0 * 100.0).round() / 100.0))
        .collect();
    let k = rates.len().max(1);
    type Pick = fn(&crate::leaderboard::LossRow) -> Option<f64>;
    for &(collectors, mode) in views {
        let (row, below) = rest.split_vertically(row_h);
        rest = below;
        let (left, right) = row.split_horizontally(650);
        let view = view_title(collectors, mode);
        let panels: [(&DrawingArea<_, _>, String, Pick); 2] = [
            (
                &left,
                format!("{view}: false-confidence rate (lower is better)"),
                |r| r.false_confidence_rate,
            ),
            (
                &right,
                format!("{view}: unresolved-path recall (higher is better)"),
                |r| r.unresolved_recall,
            ),
        ];
        for (area, desc, pick) in panels {
            let mut chart = tri!(
                ChartBuilder::on(area)
                    .margin(20)
                    .caption(&desc, font(15))
                    .x_label_area_size(50)
                    .y_label_area_size(60)
                    .build_cartesian_2d(-0.3f64..(k as f64 - 0.7), 0f64..1.05f64),
                path
            );
            draw_unit_mesh(&mut chart, "synthetic loss rate", None, path)?;
            draw_categories(
                &full,
                &chart,
                &labels,
                "no loss sweep in this result set",
                path,
            )?;
            for p in profilers {
                let pts: Vec<Option<(f64, f64)>> = rates
                    .iter()
                    .enumerate()
                    .map(|(i, rate)| {
                        lb.loss
                            .iter()
                            .find(|r| {
                                &r.profiler == p
                                    && r.collectors == Some(collectors)
                                    && r.mode == Some(mode)
                                    && r.loss_rate == Some(*rate)
                            })
                            .and_then(pick)
                            .map(|v| (i as f64, v.clamp(0.0, 1.0)))
                    })
                    .collect();
                // Undefined points (no unresolved symptom at that loss) break the line.
                for seg in pts.split(Option::is_none) {
                    let seg: Vec<(f64, f64)> = seg.iter().flatten().copied().collect();
                    if seg.len() > 1 {
                        tri!(
                            chart.draw_series(LineSeries::new(
                                seg.clone(),
                                colour(p).stroke_width(3)
                            )),
                            path
                        );
                    }
                }
                let dots = pts
                    .iter()
                    .flatten()
                    .map(|&(x, y)| Circle::new((x, y), 5, colour(p).filled()));
                tri!(chart.draw_series(dots), path);
            }
        }
    }
    tri!(full.present(), path);
    Ok(())
}

/// Short code of a view for the heatmap header: collectors/mode.
fn view_code(c: &CaseScore) -> String {
    let col = match c.collectors {
        ground_truth::Collectors::Cupti => "cu",
        ground_truth::Collectors::Host => "ho",
        ground_truth::Collectors::Combined => "co",
        ground_truth::Collectors::Kineto => "ki",
        ground_truth::Collectors::KinetoHost => "kh",
    };
    let mode = match c.mode {
        ground_truth::Mode::Instrumented => "i",
        ground_truth::Mode::Closed => "c",
    };
    format!("{col}/{mode}")
}

/// Loss-free cases: rows = bundles, columns = profiler × view; blue = every symptom
/// correct, orange = some symptom wrong, grey = no symptom asked in that view.
fn case_heatmap(path: &Path, scores: &[CaseScore], profilers: &[String]) -> Result<(), EvalError> {
    // (bundle/backend) → (profiler, collectors, mode) → verdict
    type Column = (String, ground_truth::Collectors, ground_truth::Mode);
    let mut cells: BTreeMap<String, BTreeMap<Column, Option<bool>>> = BTreeMap::new();
    let mut columns: BTreeSet<Column> = BTreeSet::new();
    let mut codes: BTreeMap<(ground_truth::Collectors, ground_truth::Mode), String> =
        BTreeMap::new();
    let backends: BTreeSet<&str> = scores.iter().map(|s| s.backend.as_str()).collect();
    for s in scores.iter().filter(|s| s.is_loss_free()) {
        let row = if backends.len() > 1 {
            format!("{} ({})", s.bundle, s.backend)
        } else {
            s.bundle.clone()
        };
        let col = (s.profiler.clone(), s.collectors, s.mode);
        codes.insert((s.collectors, s.mode), view_code(s));
        columns.insert(col.clone());
        let v = (!s.symptoms.is_empty()).then(|| s.all_correct());
        let cell = cells.entry(row).or_default().entry(col).or_insert(v);
        // Several cases in one cell (e.g. repeated scoring): wrong if any is wrong.
        *cell = match (*cell, v) {
            (Some(a), Some(b)) => Some(a && b),
            (a, b) => a.or(b),
        };
    }
    let columns: Vec<_> = columns.into_iter().collect();
    let rows: Vec<&String> = cells.keys().collect();
    let label_w = rows
        .iter()
        .map(|r| text_width(r, 12))
        .max()
        .unwrap_or(0)
        .max(80)
        + 20;
    let cw = 34u32;
    let ch = if rows.len() <= 120 {
        18u32
    } else {
        (2400 / rows.len() as u32).max(3)
    };
    let label_every = if ch >= 10 { 1 } else { (12 / ch) as usize + 1 };
    let header = 110u32;
    let width = (label_w + cw * columns.len().max(1) as u32 + 40).max(900);
    let height = header + ch * rows.len().max(1) as u32 + 60;
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    tri!(root.fill(&WHITE), path);
    let title =
        "Loss-free cases: every symptom correct (blue), some wrong (orange), nothing asked (grey)";
    tri!(
        root.draw_text(
            title,
            &font(18).pos(Pos::new(HPos::Left, VPos::Top)),
            (10, 8)
        ),
        path
    );
    let legend: Vec<String> = codes
        .iter()
        .map(|((c, m), code)| format!("{code} = {}/{}", c.as_str(), m.as_str()))
        .collect();
    tri!(
        root.draw_text(
            &format!("views: {}", legend.join(", ")),
            &font(12).pos(Pos::new(HPos::Left, VPos::Top)),
            (10, 34)
        ),
        path
    );
    if rows.is_empty() {
        tri!(
            root.draw_text(
                "no loss-free cases",
                &font(16).pos(Pos::new(HPos::Left, VPos::Top)),
                (10, 60)
            ),
            path
        );
        tri!(root.present(), path);
        return Ok(());
    }
    let x0 = label_w as i32;
    // Profiler headers spanning their columns, then view codes.
    for p in profilers {
        let idx: Vec<usize> = columns
            .iter()
            .enumerate()
            .filter(|(_, c)| &c.0 == p)
            .map(|(i, _)| i)
            .collect();
        if let (Some(&a), Some(&b)) = (idx.first(), idx.last()) {
            let xa = x0 + (a as u32 * cw) as i32;
            let xb = x0 + ((b + 1) as u32 * cw) as i32;
            tri!(
                root.draw(&Rectangle::new(
                    [(xa + 1, 62), (xb - 1, 80)],
                    RGBColor(230, 230, 230).filled()
                )),
                path
            );
            let span = (xb - xa) as u32;
            let mut name = p.clone();
            while text_width(&name, 12) > span.saturating_sub(4) && name.chars().count() > 2 {
                name.pop();
            }
            tri!(
                root.draw_text(
                    &name,
                    &font(12).pos(Pos::new(HPos::Center, VPos::Center)),
                    ((xa + xb) / 2, 71)
                ),
                path
            );
        }
    }
    for (i, c) in columns.iter().enumerate() {
        let x = x0 + (i as u32 * cw) as i32 + cw as i32 / 2;
        let code = codes.get(&(c.1, c.2)).cloned().unwrap_or_default();
        tri!(
            root.draw_text(
                &code,
                &font(11).pos(Pos::new(HPos::Center, VPos::Center)),
                (x, header as i32 - 18)
            ),
            path
        );
    }
    let (correct, wrong, not_asked) = (
        rgb(crate::palette::CORRECT),
        rgb(crate::palette::WRONG),
        rgb(crate::palette::NOT_ASKED),
    );
    for (ri, r) in rows.iter().enumerate() {
        let y = (header + ri as u32 * ch) as i32;
        if ri % label_every == 0 {
            tri!(
                root.draw_text(
                    r,
                    &font(12.min(ch.max(8))).pos(Pos::new(HPos::Right, VPos::Center)),
                    (x0 - 6, y + ch as i32 / 2)
                ),
                path
            );
        }
        for (ci, c) in columns.iter().enumerate() {
            let x = x0 + (ci as u32 * cw) as i32;
            let fill = match cells[*r].get(c) {
                Some(Some(true)) => correct,
                Some(Some(false)) => wrong,
                Some(None) => not_asked,
                None => WHITE,
            };
            let gap = i32::from(ch >= 6);
            tri!(
                root.draw(&Rectangle::new(
                    [(x + 1, y + gap), (x + cw as i32 - 1, y + ch as i32 - gap)],
                    fill.filled()
                )),
                path
            );
        }
    }
    tri!(root.present(), path);
    Ok(())
}
