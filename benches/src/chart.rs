//! Charts of benchmark results (SVG, drawn with `plotters`): what people would rather look
//! at than read, such as latency distributions of two systems side by side.

use plotters::prelude::*;
use std::path::Path;

/// Latency percentiles (x: latency in ms on a log scale, y: percentile) of two systems,
/// stampkv and its peer, one panel per case. `series[i]` holds the latencies (ms) of case
/// `titles[i]`: (stampkv's, the peer's), in any order.
pub fn latency_cdf(
    path: &Path,
    caption: &str,
    titles: &[String],
    series: &[(Vec<f64>, Vec<f64>)],
) -> Result<(), Box<dyn std::error::Error>> {
    let columns = 2;
    let rows = titles.len().div_ceil(columns).max(1);
    let height = u32::try_from(rows).unwrap_or(1) * 320 + 40;
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(caption, ("sans-serif", 22))?;
    let panels = root.split_evenly((rows, columns));
    for ((panel, title), (ours, peer)) in panels.iter().zip(titles).zip(series) {
        let mut ours = ours.clone();
        let mut peer = peer.clone();
        ours.sort_by(f64::total_cmp);
        peer.sort_by(f64::total_cmp);
        let low = ours.first().copied().unwrap_or(0.01).min(peer.first().copied().unwrap_or(0.01)).max(0.001);
        let high =
            ours.last().copied().unwrap_or(1.0).max(peer.last().copied().unwrap_or(1.0)).max(low * 10.0);
        let mut chart = ChartBuilder::on(panel)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(45)
            .build_cartesian_2d((low..high).log_scale(), 0.0..100.0)?;
        chart
            .configure_mesh()
            .x_labels(8)
            .x_label_formatter(&|ms| format!("{ms:.2}"))
            .x_desc("latency (ms, log scale)")
            .y_desc("percentile")
            .draw()?;
        for (latencies, name, color) in [(&ours, "stampkv serve", BLUE), (&peer, "denokv serve", RED)] {
            let n = latencies.len().max(1) as f64;
            // At most ~500 points per line: every k-th sorted latency.
            let step = (latencies.len() / 500).max(1);
            let points = latencies
                .iter()
                .enumerate()
                .filter(|(i, _)| i % step == 0 || *i + 1 == latencies.len())
                .map(|(i, &ms)| (ms.max(low), (i + 1) as f64 * 100.0 / n));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    }
    root.present()?;
    Ok(())
}

/// Line colours of [`latency_cdf_series`], told apart on white.
pub const SERIES_COLORS: [RGBColor; 7] = [
    RGBColor(200, 30, 30),
    RGBColor(30, 90, 200),
    RGBColor(30, 150, 60),
    RGBColor(230, 130, 0),
    RGBColor(150, 40, 170),
    RGBColor(0, 160, 170),
    RGBColor(60, 60, 60),
];

/// Latency percentiles of any number of named series on one plot (x: latency in ms on a
/// log scale, y: percentile). `series` holds (name, latencies in ms in any order); the
/// lines take the colours of [`SERIES_COLORS`] in order, then repeat them.
pub fn latency_cdf_series(
    path: &Path,
    caption: &str,
    series: &[(String, Vec<f64>)],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut sorted: Vec<(&str, Vec<f64>)> = series
        .iter()
        .map(|(name, latencies)| {
            let mut latencies = latencies.clone();
            latencies.sort_by(f64::total_cmp);
            (name.as_str(), latencies)
        })
        .collect();
    sorted.retain(|(_, latencies)| !latencies.is_empty());
    let low = sorted.iter().filter_map(|(_, l)| l.first().copied()).fold(f64::INFINITY, f64::min).max(0.001);
    let low = if low.is_finite() { low } else { 0.01 };
    let high = sorted.iter().filter_map(|(_, l)| l.last().copied()).fold(low * 10.0, f64::max);
    let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((low..high).log_scale(), 0.0..100.0)?;
    chart
        .configure_mesh()
        .x_labels(10)
        .x_label_formatter(&|ms| format!("{ms:.2}"))
        .x_desc("latency (ms, log scale)")
        .y_desc("percentile")
        .draw()?;
    for ((name, latencies), &color) in sorted.iter().zip(SERIES_COLORS.iter().cycle()) {
        let n = latencies.len() as f64;
        // At most ~1000 points per line: every k-th sorted latency, and the last one.
        let step = (latencies.len() / 1000).max(1);
        let points = latencies
            .iter()
            .enumerate()
            .filter(|(i, _)| i % step == 0 || *i + 1 == latencies.len())
            .map(|(i, &ms)| (ms.max(low), (i + 1) as f64 * 100.0 / n));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// One panel of [`curves`]: a metric against the number of keys, one line per engine.
pub struct Panel {
    /// Title above the panel.
    pub title: String,
    /// Label of the y axis (the unit).
    pub y_desc: String,
    /// (engine, points (keys, value) in any order).
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

/// Cost curves: a grid of panels, each a metric (y, linear from 0) against the database
/// size (x, keys on a log scale), one coloured line with point marks per engine. An engine
/// keeps its colour in every panel (the order of first appearance).
pub fn curves(path: &Path, caption: &str, panels: &[Panel]) -> Result<(), Box<dyn std::error::Error>> {
    let columns = 3;
    let rows = panels.len().div_ceil(columns).max(1);
    let height = u32::try_from(rows).unwrap_or(1) * 300 + 50;
    let root = SVGBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(caption, ("sans-serif", 22))?;
    let mut engines: Vec<&str> = Vec::new();
    for (name, _) in panels.iter().flat_map(|p| &p.series) {
        if !engines.contains(&name.as_str()) {
            engines.push(name);
        }
    }
    for (area, panel) in root.split_evenly((rows, columns)).iter().zip(panels) {
        let points = || panel.series.iter().flat_map(|(_, points)| points.iter());
        let x_low = points().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let x_high = points().map(|p| p.0).fold(0.0, f64::max);
        let (x_low, x_high) = if x_low.is_finite() { (x_low / 2.0, x_high * 2.0) } else { (1.0, 10.0) };
        let y_high = points().map(|p| p.1).fold(0.0, f64::max).max(f64::MIN_POSITIVE) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(32)
            .y_label_area_size(60)
            .build_cartesian_2d((x_low..x_high).log_scale(), 0.0..y_high)?;
        chart
            .configure_mesh()
            .x_labels(6)
            .x_label_formatter(&|keys| key_count_text(*keys))
            .y_label_formatter(&|v| number_text(*v))
            .x_desc("keys (log scale)")
            .y_desc(panel.y_desc.as_str())
            .draw()?;
        for (name, points) in &panel.series {
            let index = engines.iter().position(|e| e == name).unwrap_or(0);
            let color = SERIES_COLORS.get(index % SERIES_COLORS.len()).copied().unwrap_or(BLACK);
            let mut points = points.clone();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// `1M`, `10M`, `100k`: a key count for an axis label.
pub fn key_count_text(keys: f64) -> String {
    if keys >= 1e6 {
        format!("{}M", (keys / 1e6 * 10.0).round() / 10.0)
    } else if keys >= 1e3 {
        format!("{}k", (keys / 1e3 * 10.0).round() / 10.0)
    } else {
        format!("{keys:.0}")
    }
}

/// A compact number for an axis label: `1.2M`, `350k`, `2.5`.
pub fn number_text(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if value >= 1e4 {
        format!("{:.0}k", value / 1e3)
    } else if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}
