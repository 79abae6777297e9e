//! `sluice top`: a live view of a running pipeline in the terminal, read
//! from its `/metrics` once a second (`telemetry::scrape`): per partition
//! the rates in and out by door, lag, what the source holds unread, the age
//! of the oldest unfinished record, batches in flight and the partition's
//! state (flowing, back-pressured, late behind an open breaker, stalled);
//! totals, each sink's breaker and (with several sinks) the routes above.
//! With several pipelines in one process each partition and sink is named
//! `pipeline:name`. `q` (or Esc, Ctrl-C) quits.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};

use crate::config::Config;
use crate::telemetry::repeats::thousands;
use crate::telemetry::scrape::{self, PartitionView, Scrape, View};

#[derive(clap::Args, Debug)]
pub(crate) struct TopArgs {
    /// The pipeline's config: top reads the endpoint of its `[metrics]
    /// listen`; a list file's, the listener its pipelines share.
    #[arg(long, short = 'c', value_name = "FILE", required_unless_present = "url")]
    pub config: Option<PathBuf>,
    /// The metrics endpoint to read instead, `HOST:PORT`.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "config")]
    pub url: Option<SocketAddr>,
    /// Seconds between readings.
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub every: f64,
}

/// The metrics endpoint a command (`top`, `tap`) reads: `--url`, or the
/// config's `[metrics] listen` (a list file's: the one its pipelines share).
pub(super) fn endpoint(url: Option<SocketAddr>, config: Option<&std::path::Path>, command: &str) -> Result<SocketAddr> {
    match (url, config) {
        (Some(addr), _) => Ok(addr),
        (None, Some(given)) => {
            // A list file: the listener its pipelines share.
            let file = &super::several::listener(given)?;
            let cfg = Config::load(file)?;
            super::mask::mask_output_as(&cfg);
            cfg.metrics.listen.with_context(|| {
                format!(
                    "config {}: metrics.listen is not set, and {command} reads the pipeline's metrics listener: \
                     set it ([metrics] listen = \"127.0.0.1:9898\") or pass --url",
                    file.display()
                )
            })
        }
        (None, None) => anyhow::bail!("name the pipeline's config (-c) or its metrics endpoint (--url)"),
    }
}

pub(crate) fn top(args: &TopArgs) -> Result<()> {
    let addr = endpoint(args.url, args.config.as_deref(), "top")?;
    anyhow::ensure!(args.every >= 0.1, "--every {}: at least 0.1 seconds", args.every);
    let every = Duration::from_secs_f64(args.every);
    anyhow::ensure!(
        std::io::IsTerminal::is_terminal(&std::io::stdout()),
        "sluice top draws on a terminal, and standard output is not one (a script can read http://{addr}/metrics, \
         or sample events with sluice tap)"
    );
    let mut terminal = ratatui::try_init().context("set up the terminal")?;
    let result = watch(&mut terminal, addr, every);
    ratatui::restore();
    result
}

/// Read, draw, and wait for a key until the next reading; until `q`.
fn watch(terminal: &mut ratatui::DefaultTerminal, addr: SocketAddr, every: Duration) -> Result<()> {
    let mut last: Option<(Scrape, Instant)> = None;
    let mut shown = Shown { addr, every, view: None, error: None, routes: Vec::new() };
    loop {
        let read_at = Instant::now();
        match scrape::fetch(addr, every.max(Duration::from_secs(1))) {
            Ok(now) => {
                let view = match &last {
                    Some((before, at)) => scrape::view(before, &now, read_at.duration_since(*at).as_secs_f64()),
                    // One reading has no rates yet; its gauges it has.
                    None => scrape::view(&now, &now, 0.0),
                };
                shown.view = Some(view);
                shown.routes = scrape::routes(&now);
                shown.error = None;
                last = Some((now, read_at));
            }
            Err(e) => shown.error = Some(e.to_string()),
        }
        terminal.draw(|frame| shown.draw(frame)).context("draw")?;
        let next = read_at + every;
        while let Some(left) = next.checked_duration_since(Instant::now()) {
            if !event::poll(left).context("read the keyboard")? {
                break;
            }
            if let Event::Key(k) = event::read().context("read the keyboard")?
                && k.kind == KeyEventKind::Press
                && (matches!(k.code, KeyCode::Char('q') | KeyCode::Esc)
                    || (k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL)))
            {
                return Ok(());
            }
        }
    }
}

struct Shown {
    addr: SocketAddr,
    every: Duration,
    view: Option<View>,
    error: Option<String>,
    /// With several sinks, the routes in force, as `check` draws them.
    routes: Vec<String>,
}

const COLUMNS: [&str; 10] =
    ["PARTITION", "IN/S", "DELIVERED/S", "DUP/S", "QUAR/S", "LAG", "BEHIND", "OLDEST", "IN FLIGHT", "STATE"];

impl Shown {
    fn draw(&self, frame: &mut ratatui::Frame) {
        let head_lines = 4 + u16::from(!self.routes.is_empty());
        let [head, body, foot] =
            Layout::vertical([Constraint::Length(head_lines), Constraint::Min(3), Constraint::Length(1)])
                .areas(frame.area());
        let title = format!(" sluice top · http://{}/metrics · every {:.1} s ", self.addr, self.every.as_secs_f64());
        let mut lines = Vec::new();
        match (&self.view, &self.error) {
            (_, Some(e)) => {
                lines.push(Line::styled(format!("{e}; trying again"), Style::default().fg(Color::Red)));
            }
            (None, None) => lines.push(Line::raw("reading…")),
            (Some(_), None) => {}
        }
        if let Some(v) = &self.view {
            let t = &v.total;
            lines.push(Line::raw(format!(
                "in {}/s  delivered {}/s  duplicate {}/s  quarantined {}/s  dropped {}/s",
                per_second(t.in_rate),
                per_second(t.delivered_rate),
                per_second(t.duplicate_rate),
                per_second(t.quarantined_rate),
                per_second(t.dropped_rate)
            )));
            if self.error.is_none() {
                let breakers: Vec<String> = v.breakers.iter().map(|(sink, state)| format!("{sink} {state}")).collect();
                lines.push(Line::raw(format!(
                    "breaker: {}",
                    if breakers.is_empty() { "-".into() } else { breakers.join(", ") }
                )));
                if !self.routes.is_empty() {
                    lines.push(Line::raw(format!("routes: {}", self.routes.join(" · "))));
                }
            }
        }
        frame.render_widget(Paragraph::new(lines).block(Block::bordered().title(title)), head);
        let rows: Vec<Row> = match &self.view {
            Some(v) => v
                .partitions
                .iter()
                .map(|p| row(p, Style::default()))
                .chain((v.partitions.len() > 1).then(|| row(&v.total, Style::default().add_modifier(Modifier::BOLD))))
                .collect(),
            None => Vec::new(),
        };
        let name_width = self
            .view
            .iter()
            .flat_map(|v| &v.partitions)
            .map(|p| p.name.chars().count())
            .max()
            .unwrap_or(9)
            .clamp(9, 60) as u16;
        let widths = [
            Constraint::Length(name_width),
            Constraint::Length(9),
            Constraint::Length(11),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(9),
            Constraint::Length(10),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Min(7),
        ];
        let header = Row::new(COLUMNS.iter().enumerate().map(|(i, c)| {
            let title = Line::from(*c);
            // Numbers are right-aligned under their titles.
            Cell::from(if i == 0 || i + 1 == COLUMNS.len() { title } else { title.right_aligned() })
        }))
        .style(Style::default().add_modifier(Modifier::REVERSED));
        frame.render_widget(
            Table::new(rows, widths).header(header).block(Block::bordered().title(" partitions ")),
            body,
        );
        frame.render_widget(Paragraph::new("q quits"), foot);
    }
}

fn row(p: &PartitionView, style: Style) -> Row<'static> {
    let count = |v: Option<f64>| v.map_or("-".to_string(), |v| thousands(v.max(0.0).round() as u64));
    let state_style = match p.state() {
        "STALLED" => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        "late" | "backpressured" => Style::default().fg(Color::Yellow),
        _ => Style::default(),
    };
    let number = |s: String| Cell::from(Line::from(s).right_aligned());
    Row::new(vec![
        Cell::from(tail(&p.name, 60)),
        number(per_second(p.in_rate)),
        number(per_second(p.delivered_rate)),
        number(per_second(p.duplicate_rate)),
        number(per_second(p.quarantined_rate)),
        number(count(p.gauges.lag)),
        number(count(p.gauges.behind)),
        number(if p.gauges.oldest_age > 0.0 { format!("{:.1} s", p.gauges.oldest_age) } else { "-".into() }),
        number(format!("{}", p.gauges.in_flight as u64)),
        Cell::from(format!(" {}", p.state())).style(state_style),
    ])
    .style(style)
}

fn per_second(v: f64) -> String {
    thousands(v.max(0.0).round() as u64)
}

/// The end of a long name, where partitions differ (a file's name).
fn tail(name: &str, width: usize) -> String {
    let n = name.chars().count();
    if n <= width { name.to_string() } else { format!("…{}", name.chars().skip(n - width + 1).collect::<String>()) }
}
