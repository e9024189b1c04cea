//! Where a receipt is rendered. `report`, `compare` and a range's receipt in
//! the window decide what they say, as a [`Doc`]; this module alone lays it
//! out as terminal text or Markdown (headings, bold headlines, aligned
//! columns, pipe tables), and writes the numbers of their JSON.

use std::fmt::Write as _;

use serde_json::{Value, json};

/// How a column's cells sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// One column of a [`Table`].
#[derive(Debug, Clone)]
pub struct Col {
    pub name: String,
    pub align: Align,
    /// Characters it takes in terminal text (cells are padded to it, never
    /// cut), and spaces before it.
    pub width: usize,
    pub gap: usize,
}

impl Col {
    /// A left-aligned column `width` wide.
    pub fn left(name: &str, width: usize) -> Self {
        Self {
            name: name.into(),
            align: Align::Left,
            width,
            gap: 0,
        }
    }

    /// A right-aligned column `width` wide.
    pub fn right(name: &str, width: usize) -> Self {
        Self {
            name: name.into(),
            align: Align::Right,
            width,
            gap: 0,
        }
    }

    /// The same column with `n` spaces before it in terminal text.
    pub fn after(mut self, n: usize) -> Self {
        self.gap = n;
        self
    }
}

/// A table: a header and rows of cells, one per column (a short row is
/// padded with empty cells).
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub cols: Vec<Col>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(cols: Vec<Col>) -> Self {
        Self {
            cols,
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Terminal text: each line `indent`, then the cells padded to their
    /// columns; trailing cells left empty add nothing after the last filled
    /// one.
    fn text(&self, indent: &str, out: &mut String) {
        let head: Vec<String> = self.cols.iter().map(|c| c.name.clone()).collect();
        for cells in std::iter::once(&head).chain(&self.rows) {
            let mut line = String::from(indent);
            let filled = cells
                .iter()
                .rposition(|c| !c.is_empty())
                .map_or(0, |i| i + 1);
            for (i, col) in self.cols.iter().enumerate().take(filled) {
                let cell = cells.get(i).map_or("", String::as_str);
                line.push_str(&" ".repeat(col.gap));
                let pad = col.width.saturating_sub(cell.chars().count());
                match col.align {
                    Align::Left => {
                        line.push_str(cell);
                        // Padding after the last cell of a line is left out.
                        if i + 1 < filled {
                            line.push_str(&" ".repeat(pad));
                        }
                    }
                    Align::Right => {
                        line.push_str(&" ".repeat(pad));
                        line.push_str(cell);
                    }
                }
            }
            let _ = writeln!(out, "{line}");
        }
    }

    /// A Markdown pipe table.
    fn markdown(&self, out: &mut String) {
        let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
            out.push('|');
            for c in cells {
                // An empty cell is one space wide.
                if c.is_empty() {
                    out.push_str(" |");
                } else {
                    let _ = write!(out, " {c} |");
                }
            }
            out.push('\n');
        };
        line(out, &mut self.cols.iter().map(|c| c.name.as_str()));
        out.push('|');
        for c in &self.cols {
            out.push_str(match c.align {
                Align::Left => "---|",
                Align::Right => "---:|",
            });
        }
        out.push('\n');
        for cells in &self.rows {
            line(
                out,
                &mut (0..self.cols.len()).map(|i| cells.get(i).map_or("", String::as_str)),
            );
        }
    }
}

/// One part of a receipt.
#[derive(Debug, Clone)]
pub enum Block {
    /// The document's title (Markdown only: a terminal receipt starts with
    /// its headline).
    Title(String),
    /// The sentence a receipt opens with.
    Headline(String),
    /// A line of terminal text, or a paragraph of Markdown.
    Para(String),
    /// An empty line in terminal text (Markdown paragraphs are apart
    /// already).
    Gap,
    /// Facts as a two-column table without a header in Markdown, `key
    /// value` lines in text (each after `indent`).
    Facts {
        indent: String,
        rows: Vec<(String, String)>,
    },
    Table {
        indent: String,
        table: Table,
    },
    /// A section's heading (Markdown `##`; a line of its own in text).
    Heading(String),
    /// Lines shown as they are (a fenced block in Markdown).
    Pre(String),
    /// A bulleted list in Markdown, a line each in text (after `indent`).
    List {
        indent: String,
        items: Vec<String>,
    },
}

/// A receipt, block by block.
#[derive(Debug, Clone, Default)]
pub struct Doc {
    pub blocks: Vec<Block>,
}

impl Doc {
    pub fn push(&mut self, b: Block) -> &mut Self {
        self.blocks.push(b);
        self
    }

    /// The terminal receipt.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for b in &self.blocks {
            match b {
                Block::Title(_) => {}
                Block::Headline(h) => {
                    let _ = writeln!(s, "{h}");
                }
                Block::Para(p) => {
                    let _ = writeln!(s, "{p}");
                }
                Block::Gap => s.push('\n'),
                Block::Facts { indent, rows } => {
                    for (k, v) in rows {
                        let _ = writeln!(s, "{indent}{k} {v}");
                    }
                }
                Block::Table { indent, table } => table.text(indent, &mut s),
                Block::Heading(h) => {
                    let _ = writeln!(s, "{h}");
                }
                Block::Pre(text) => s.push_str(text),
                Block::List { indent, items } => {
                    for i in items {
                        let _ = writeln!(s, "{indent}{i}");
                    }
                }
            }
        }
        s
    }

    /// The Markdown receipt, blocks a blank line apart.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        for b in &self.blocks {
            match b {
                Block::Title(t) => {
                    let _ = writeln!(s, "# {t}");
                }
                Block::Headline(h) => {
                    let _ = writeln!(s, "**{h}**");
                }
                Block::Para(p) => {
                    let _ = writeln!(s, "{p}");
                }
                Block::Gap => continue,
                Block::Facts { rows, .. } => {
                    let _ = writeln!(s, "| | |\n|---|---|");
                    for (k, v) in rows {
                        let _ = writeln!(s, "| {k} | {v} |");
                    }
                }
                Block::Table { table, .. } => table.markdown(&mut s),
                Block::Heading(h) => {
                    let _ = writeln!(s, "## {h}");
                }
                Block::Pre(text) => {
                    let _ = writeln!(s, "```\n{}```", text.trim_start_matches('\n'));
                }
                Block::List { items, .. } => {
                    for i in items {
                        let _ = writeln!(s, "- {i}");
                    }
                }
            }
            s.push('\n');
        }
        // One newline at the end, as a file wants.
        while s.ends_with("\n\n") {
            s.pop();
        }
        s
    }
}

/// A number for JSON: `null` where it is not finite (JSON has no NaN).
pub fn num(v: f64) -> Value {
    if v.is_finite() { json!(v) } else { Value::Null }
}

/// An optional number for JSON.
pub fn opt(v: Option<f64>) -> Value {
    v.map_or(Value::Null, num)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(vec![
            Col::left("channel", 10),
            Col::right("drift", 8).after(1),
            Col::left("note", 0).after(1),
        ]);
        t.row(vec!["mem.rss".into(), "+4 KiB".into(), String::new()]);
        t.row(vec!["a.much.longer.name".into(), "0".into(), "high".into()]);
        t
    }

    #[test]
    fn text_pads_columns_and_never_cuts_a_cell() {
        let mut s = String::new();
        table().text("  ", &mut s);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "  channel       drift note");
        assert_eq!(lines[1], "  mem.rss      +4 KiB");
        assert_eq!(lines[2], "  a.much.longer.name        0 high");
    }

    #[test]
    fn markdown_tables_align_numbers_right() {
        let mut s = String::new();
        table().markdown(&mut s);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "| channel | drift | note |");
        assert_eq!(lines[1], "|---|---:|---|");
        assert_eq!(lines[2], "| mem.rss | +4 KiB | |");
    }

    #[test]
    fn a_document_is_laid_out_for_each_medium() {
        let mut d = Doc::default();
        d.push(Block::Title("Drift receipt".into()))
            .push(Block::Headline("Memory is flat.".into()))
            .push(Block::Facts {
                indent: "  ".into(),
                rows: vec![("digest".into(), "sha256:ab".into())],
            })
            .push(Block::List {
                indent: "  unavailable: ".into(),
                items: vec!["gpu: no driver".into()],
            });
        assert_eq!(
            d.text(),
            "Memory is flat.\n  digest sha256:ab\n  unavailable: gpu: no driver\n"
        );
        assert_eq!(
            d.markdown(),
            "# Drift receipt\n\n**Memory is flat.**\n\n| | |\n|---|---|\n| digest | sha256:ab |\n\n- gpu: no driver\n"
        );
        assert!(num(f64::NAN).is_null() && opt(None).is_null() && num(1.5) == json!(1.5));
    }
}
