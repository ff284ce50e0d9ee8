//! `ember init`: a commented job file inferred from the user's own data, written to stdout, and
//! one line for stderr saying what was inferred and why. Its defaults are ones that train well
//! on small data: standardised columns, Adam at 1e-3, shuffled batches of a size that fits.

use crate::data::columns::{ColumnKind, Missing, PIECEWISE_BINS, Scaling, infer};
use crate::data::table::TextCsv;
use crate::data::{class_order, images};
use crate::error::{EmberError, Result};
use crate::input_err;
use std::fmt::Write as _;
use std::path::Path;

/// A job file, the reason for its task, and (for a table) the column table for stderr.
pub struct Draft {
    pub toml: String,
    pub why: String,
    pub columns: Option<String>,
}

/// Labels with at most this many distinct integers are classes; more are a regression target.
const MAX_INTEGER_CLASSES: usize = 20;

/// Rows per step: about a fiftieth of the training rows, a power of two from 16 to 256.
fn batch_size(train_rows: usize) -> usize {
    let target = (train_rows / 50).max(1);
    let mut size = 16;
    while size * 2 <= target && size < 256 {
        size *= 2;
    }
    size
}

/// The task a label column calls for, and why.
fn task_of(values: &[&str], label: &str) -> (&'static str, String) {
    let distinct = class_order(values.iter().map(|v| v.to_string()).collect());
    let integers = values.iter().all(|v| v.parse::<i64>().is_ok());
    let numbers = values
        .iter()
        .all(|v| v.parse::<f64>().is_ok_and(f64::is_finite));
    let shown = || match distinct.len() {
        0..=6 => distinct.join(", "),
        n => format!("{}, … {} more", distinct[..6].join(", "), n - 6),
    };
    if distinct.len() == 2 {
        let why = format!(
            "\"{label}\" has two values ({}); \"{}\" is the positive class",
            shown(),
            distinct[1]
        );
        ("binary", why)
    } else if !numbers {
        let why = format!(
            "\"{label}\" holds text: {} classes ({})",
            distinct.len(),
            shown()
        );
        ("classification", why)
    } else if integers && distinct.len() <= MAX_INTEGER_CLASSES {
        let why = format!(
            "\"{label}\" holds {} integer values ({})",
            distinct.len(),
            shown()
        );
        ("classification", why)
    } else {
        let why = format!(
            "\"{label}\" holds numbers with {} distinct values",
            distinct.len()
        );
        ("regression", why)
    }
}

/// `text` as a TOML string, escaped.
fn quote(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// `name` as a TOML key: bare where TOML allows it, quoted otherwise.
fn key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare { name.to_string() } else { quote(name) }
}

/// The common head and tail of a drafted job file; `top` (commented lines, keys) follows the
/// top-level keys.
fn job_file(
    command: &str,
    task: &str,
    (rows, epochs): (usize, &str),
    top: &str,
    data: &str,
    model: &str,
) -> String {
    let train_rows = training_rows(rows);
    let mut t = String::new();
    let _ = writeln!(t, "# Written by `{command}`: a starting point to edit.");
    let _ = writeln!(t, "# Train it with: ember train THIS_FILE.toml\n");
    let _ = writeln!(t, "task = \"{task}\"");
    let _ = writeln!(t, "{epochs}");
    let _ = writeln!(
        t,
        "# Rows per step: about 1/50 of the {train_rows} training rows, from 16 to 256.\nbatch_size = {}",
        batch_size(train_rows)
    );
    let _ = writeln!(
        t,
        "# A new order of the rows every epoch, drawn from the seed.\nshuffle = true\nseed = 42\n{top}"
    );
    let _ = writeln!(t, "[data]\n{data}");
    let _ = writeln!(
        t,
        "# A seeded fifth of the rows, held out to validate on.\nvalid_fraction = 0.2\n"
    );
    let _ = writeln!(t, "[model]\n{model}");
    let _ = writeln!(
        t,
        "# sgd, adam or adamw; docs/config.md has schedules, clipping, early stopping."
    );
    let _ = writeln!(t, "[adam]\nlr = 1e-3");
    t
}

/// The rows of a file of `rows` that train, outside the drafted `valid_fraction = 0.2`.
fn training_rows(rows: usize) -> usize {
    rows * 4 / 5
}

/// The drafted `epochs` of a job that stops early (see [`EARLY_STOPPING`]), and of one that
/// does not.
const STOPPING_EPOCHS: &str =
    "# Passes over the training rows at most: early stopping ends the run sooner.\nepochs = 60";
const FIXED_EPOCHS: &str = "# Passes over the training rows.\nepochs = 20";

/// A table's drafted early stopping. Over ember's table benchmark (docs/tables.md, early
/// stopping), 60 epochs that stop after 5 without a better validation loss and keep the best
/// epoch's model beat 20 epochs on the 7 tables whose validation split held 500 rows or more
/// (R² 0.09 against -0.03 on a large one that overfit), but one; on the two with fewer, the
/// epoch it picked was noise, and it lost.
const EARLY_STOPPING: &str = "\n# Ends the run after 5 epochs without a lower validation loss, and makes the best\n\
    # epoch's model the run's model.\n[early_stopping]\npatience = 5\nrestore_best = true\n";

/// Early stopping is drafted where the validation split holds at least this many rows.
const EARLY_STOPPING_MIN_VALID_ROWS: usize = 500;

/// `ember init --csv PATH --label COLUMN [--category COLUMN]...`.
pub fn from_csv(path: &Path, label: &str, categories: &[String]) -> Result<Draft> {
    let missing = Missing::default();
    if categories.iter().any(|c| c == label) {
        return Err(input_err!("--category {label} names the --label column"));
    }
    let training = infer::read(path, label, &missing, categories)?;
    let csv = &training.csv;
    let at = csv.column(label, "--label")?;
    let values = label_values(csv, at, path, label, &missing)?;
    let (task, mut why) = task_of(&values, label);
    if values.len() < csv.rows() {
        let n = csv.rows() - values.len();
        why += &format!("; {n} rows without a label will be left out");
    }
    let mut columns = infer::infer(&training, at, &missing);
    let target_tail = (task == "regression")
        .then(|| infer::heavy_tail(&infer::numbers(&values)))
        .flatten();
    let train_rows = training_rows(values.len());
    columns
        .iter_mut()
        .for_each(|c| choose_scaling(c, task, target_tail, train_rows));
    if columns.iter().all(|c| c.kind == ColumnKind::Ignore) {
        return Err(EmberError::file(
            path,
            format!("no column besides \"{label}\" to learn from (see the table above)"),
        ))
        .inspect_err(|_| eprint!("{}", infer::table(&columns)));
    }
    let mut data = format!(
        "csv = {}\nlabel = {}\n",
        quote(&path.display().to_string()),
        quote(label)
    );
    data.push_str("# Numeric and date inputs scaled to zero mean and unit deviation (training split's statistics).\nstandardize = true");
    if task == "regression" {
        data.push_str("\n# The target scaled likewise for training; losses, MAE and predictions stay in its units.\nstandardize_target = true");
    }
    let offer = (task != "regression")
        .then(|| class_weight_offer(&values))
        .flatten();
    let top = match offer {
        Some((lines, note)) => {
            why += &format!("; {note}");
            lines
        }
        None => String::new(),
    };
    let stops = values.len() / 5 >= EARLY_STOPPING_MIN_VALID_ROWS;
    let (epochs, stopping) = match stops {
        true => (STOPPING_EPOCHS, EARLY_STOPPING),
        false => (FIXED_EPOCHS, ""),
    };
    let job = job_file(
        &init_command(path, label, categories),
        task,
        (values.len(), epochs),
        &top,
        &data,
        &mlp_model("[64, 64]"),
    );
    Ok(Draft {
        toml: job + stopping + &columns_table(&columns),
        why: format!("inferred task = \"{task}\": {why}"),
        columns: Some(infer::table(&columns)),
    })
}

/// The label cells of column `at` that are not missing: at least two, not all one value.
fn label_values<'a>(
    csv: &'a TextCsv,
    at: usize,
    path: &Path,
    label: &str,
    missing: &Missing,
) -> Result<Vec<&'a str>> {
    let values: Vec<&str> = (csv.texts(at).map(|(t, _)| t))
        .filter(|t| !missing.is(t))
        .collect();
    if values.len() < 2 {
        return Err(EmberError::file(
            path,
            format!("fewer than 2 data rows with a value in \"{label}\""),
        ));
    }
    if values.iter().all(|v| *v == values[0]) {
        return Err(EmberError::file(
            path,
            format!(
                "\"{label}\" holds one value ({}) in every row with a label: nothing to learn",
                values[0]
            ),
        ));
    }
    Ok(values)
}

/// The `ember init` command that drafts this job, as the job file's first comment says it,
/// each word quoted for the shell where it needs to be.
fn init_command(path: &Path, label: &str, categories: &[String]) -> String {
    use crate::shell::word;
    let mut command = format!(
        "ember init --csv {} --label {}",
        word(&path.display().to_string()),
        word(label)
    );
    for c in categories {
        command += &format!(" --category {}", word(c));
    }
    command
}

/// Whole numbers with at least this many distinct values (codes, counts, calendar numbers)
/// are encoded piecewise-linearly where the file has rows enough (see [`choose_scaling`]).
const PIECEWISE_MIN_VALUES: usize = 10;

/// ... and at least this many training rows per bin: on the 258 training rows of the
/// penguins, bins cost 1 to 3 points of accuracy; on tables of 3,600 rows and more they won.
const PIECEWISE_MIN_ROWS_PER_BIN: usize = 100;

/// How `column`'s values reach the model, with the reason in its `why`. In ember's table
/// benchmark (docs/tables.md, piecewise-linear numbers and heavy tails):
/// - whole numbers of many values (the codes of people, a flight's day and hour, a count) gained
///   up to 11 points of R² encoded piecewise-linearly, where decimals lost as often as they
///   won;
/// - robust scaling of a heavy tail paid for a regression whose target is not heavy-tailed
///   itself (a rating from heavy-tailed counts); it cost where the target's own tail follows the
///   inputs' (a market value from sales and assets: clipping the inputs' tails hides what sets
///   the target's), and on classifiers it lost as often as it won.
fn choose_scaling(
    column: &mut infer::Inferred,
    task: &str,
    target_tail: Option<f64>,
    train_rows: usize,
) {
    let bins = column.whole.filter(|&n| {
        n >= PIECEWISE_MIN_VALUES && train_rows >= PIECEWISE_MIN_ROWS_PER_BIN * PIECEWISE_BINS
    });
    let reason = match (bins, column.tail) {
        (Some(n), _) => {
            column.scaling = Scaling::PiecewiseLinear;
            format!(
                "{n} distinct whole numbers: piecewise-linear, up to {PIECEWISE_BINS} quantile bins"
            )
        }
        (None, Some(reach)) => {
            let robust = task == "regression" && target_tail.is_none();
            let choice = match (robust, task) {
                (true, _) => "scaled robustly",
                (false, "regression") => "kept as it is, since the target's tail is heavy too",
                (false, _) => "kept as it is for a classifier",
            };
            if robust {
                column.scaling = Scaling::Robust;
            }
            format!("a heavy tail, {reach:.0} interquartile ranges from the median: {choice}")
        }
        (None, None) => return,
    };
    column.why = match column.why.as_str() {
        "" => reason,
        why => format!("{why}; {reason}"),
    };
}

/// Below this ratio of the rarest class's rows to the commonest's, `init` offers class weights.
const IMBALANCED: f64 = 0.25;

/// For classes as imbalanced as [`IMBALANCED`] says: a commented-out `class_weight` for the job
/// file, and a note for stderr. Commented out, because weighting trades accuracy on the common
/// classes for recall on the rare ones: the user's call.
fn class_weight_offer(labels: &[&str]) -> Option<(String, String)> {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for l in labels {
        *counts.entry(l).or_default() += 1;
    }
    let (rare, few) = counts.iter().min_by_key(|(_, n)| **n)?;
    let (common, many) = counts.iter().max_by_key(|(_, n)| **n)?;
    if *few as f64 >= IMBALANCED * *many as f64 {
        return None;
    }
    // Quoted (escaped), as a class name may hold characters a TOML comment cannot.
    let sizes = format!("{}: {few} rows, {}: {many}", quote(rare), quote(common));
    let lines = format!(
        "# The classes are imbalanced ({sizes}). Uncomment to weigh each class's rows by\n\
         # rows / (classes x rows of the class) in the training loss (docs/tables.md, rare classes):\n\
         # class_weight = \"balanced\"\n"
    );
    let note = format!("classes imbalanced ({sizes}): see class_weight in the job file");
    Some((lines, note))
}

/// `[data.columns]`, every column with its type, and the reason where there is one; it ends
/// the job file (a TOML table runs to the next header).
fn columns_table(columns: &[infer::Inferred]) -> String {
    let mut t = String::from(
        "\n# Each column's type: numeric, category, date or ignore (the table on stderr says why).\n\
         # Empty cells, NA, NaN, null and ? are missing: a numeric column gets the training median\n\
         # and an input saying the cell was missing; a category gets a level of its own.\n[data.columns]\n",
    );
    for c in columns {
        let _ = write!(t, "{} = \"{}\"", key(&c.name), c.kind.name());
        match c.why.as_str() {
            "" | "text" => t.push('\n'),
            why => {
                let _ = writeln!(t, "  # {why}");
            }
        }
    }
    let embedded: Vec<(&str, usize)> = (columns.iter())
        .filter_map(|c| Some((c.name.as_str(), c.embed?)))
        .collect();
    if !embedded.is_empty() {
        t.push_str(
            "\n# Categories with too many levels for one input each: a learned vector per level, this\n\
             # wide (docs/tables.md, embeddings). Delete a line to one-hot the column's commonest levels.\n[data.embed]\n",
        );
        for (name, width) in embedded {
            let _ = writeln!(t, "{} = {width}", key(name));
        }
    }
    t.push_str(&scaling_table(columns));
    t
}

/// `[data.scaling]`, where a column is not taken as it is.
fn scaling_table(columns: &[infer::Inferred]) -> String {
    let scaled: Vec<&infer::Inferred> = (columns.iter())
        .filter(|c| c.scaling != Scaling::Standard)
        .collect();
    if scaled.is_empty() {
        return String::new();
    }
    let mut t = String::from(
        "\n# How numbers reach the model where not as they are (docs/tables.md, scaling):\n\
         # \"piecewise-linear\", an input per quantile bin, for whole numbers of many values;\n\
         # \"robust\", centred on the median, divided by the interquartile range and clipped\n\
         # smoothly, for heavy tails. Delete a line to take the column as it is.\n[data.scaling]\n",
    );
    for c in scaled {
        let name = toml::Value::try_from(c.scaling).expect("a plain enum");
        let _ = writeln!(t, "{} = {name}", key(&c.name));
    }
    t
}

/// `ember init --images DIR`.
pub fn from_images(dir: &Path) -> Result<Draft> {
    let (items, classes) = images::list(dir, None)?;
    let first = &items[0].path;
    let img = image::open(first)
        .map_err(|e| EmberError::file(first, format!("not a readable PNG or JPEG image ({e})")))?;
    let gray = matches!(
        img.color(),
        image::ColorType::L8
            | image::ColorType::La8
            | image::ColorType::L16
            | image::ColorType::La16
    );
    let (h, w) = (img.height() as usize, img.width() as usize);
    // The network reads every pixel: large images are shrunk to 64 pixels on their longer side.
    let scale = 64.0 / h.max(w) as f64;
    let (h, w) = if scale < 1.0 {
        (
            ((h as f64 * scale).round() as usize).max(1),
            ((w as f64 * scale).round() as usize).max(1),
        )
    } else {
        (h, w)
    };
    let (task, need) = match classes.len() {
        0 | 1 => {
            return Err(input_err!(
                "{}: one class folder; training needs at least two",
                dir.display()
            ));
        }
        2 => (
            "binary",
            format!(
                "two class folders ({}); \"{}\" is the positive class",
                classes.join(", "),
                classes[1]
            ),
        ),
        n => ("classification", format!("{n} class folders")),
    };
    let channels = if gray { "grayscale" } else { "rgb" };
    let data = format!(
        "source = \"images\"\ndir = {}\n# [height, width] every image is resized to (from {}).\nimage_size = [{h}, {w}]\n\
         # grayscale or rgb.\nchannels = \"{channels}\"\n# Pixels / 255.\ninput_scale = \"unit\"",
        quote(&dir.display().to_string()),
        first.display()
    );
    let command = format!("ember init --images {}", dir.display());
    let network = image_network(h, w, items.len() * 4 / 5);
    let why = format!(
        "inferred task = \"{task}\": {need}, {} images; image_size [{h}, {w}] and {channels} from {}\n{}",
        items.len(),
        first.display(),
        network.why
    );
    Ok(Draft {
        toml: job_file(
            &command,
            task,
            (items.len(), FIXED_EPOCHS),
            "",
            &data,
            &network.toml,
        ),
        why,
        columns: None,
    })
}

/// The `[model]` keys of an MLP with `hidden` layers.
fn mlp_model(hidden: &str) -> String {
    format!(
        "# Widths of the hidden layers ([] for a linear model).\nhidden = {hidden}\n\
         # relu, tanh, gelu, sigmoid or identity.\nactivation = \"relu\"\n"
    )
}

/// Convolutions need room: below this many pixels on the shorter side, init drafts an MLP.
const MIN_CNN_SIDE: usize = 16;

/// Fewer training images than this, and init offers augmentation.
const AUGMENT_BELOW: usize = 20_000;

/// The drafted network's `[model]` keys, and why on stderr.
struct Network {
    toml: String,
    why: String,
}

/// The network for images of `h`×`w`: below [`MIN_CNN_SIDE`] an MLP on the pixels; otherwise
/// blocks of a 3×3 convolution, batch norm and a 2×2 max-pool, 16 channels doubling per block,
/// added while the maps stay at least 7 pixels on a side (at most 3), then a hidden layer of 64.
fn image_network(h: usize, w: usize, train_rows: usize) -> Network {
    let side = h.min(w);
    if side < MIN_CNN_SIDE {
        return Network {
            toml: mlp_model("[256, 128]"),
            why: format!(
                "an MLP on the pixels: images under {MIN_CNN_SIDE} pixels on a side leave a convolutional network no room"
            ),
        };
    }
    let blocks = (1..=3).take_while(|k| side >> k >= 7).count();
    let channels: Vec<usize> = (0..blocks).map(|k| 16 << k).collect();
    let mut toml = mlp_model("[64]");
    toml.push_str(
        "# The last block's maps, every value (\"flatten\") or each channel's mean (\"average\").\npooling = \"flatten\"\n",
    );
    for c in &channels {
        toml.push_str(&format!(
            "\n# A 3x3 convolution, batch norm, the activation and a 2x2 max-pool.\n[[model.conv]]\nchannels = {c}\nkernel = 3\nbatch_norm = true\npool = 2\n"
        ));
    }
    let offer = train_rows < AUGMENT_BELOW;
    if offer {
        toml.push_str(
            "\n# Train-time augmentation, off: each training image shifted by up to 2 pixels and\n\
             # mirrored left to right half the time. Uncomment where a mirrored image keeps its class.\n\
             # [model.augment]\n# crop_padding = 2\n# flip = true\n",
        );
    }
    toml.push('\n');
    let maps = (h >> blocks, w >> blocks);
    let mut why = format!(
        "a convolutional network: the images are at least {MIN_CNN_SIDE} pixels on a side; {blocks} block(s) of 3x3 convolutions with batch norm and 2x2 max-pools ({} channels) leave {}x{} maps for a hidden layer of 64",
        channels
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        maps.0,
        maps.1
    );
    if offer {
        why.push_str(&format!(
            "\n[model.augment] is offered, commented out: {train_rows} training images are few enough that shifted and mirrored copies may help"
        ));
    }
    Network { toml, why }
}

#[cfg(test)]
mod mutated_files;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_follows_the_label_values() {
        assert_eq!(task_of(&["no", "yes", "no"], "y").0, "binary");
        assert_eq!(task_of(&["0", "1"], "y").0, "binary");
        assert_eq!(task_of(&["cat", "dog", "emu"], "y").0, "classification");
        assert_eq!(task_of(&["1", "2", "3", "2"], "y").0, "classification");
        assert_eq!(task_of(&["1.5", "2.25", "3.0"], "y").0, "regression");
        let many: Vec<String> = (0..50).map(|i| i.to_string()).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(task_of(&many, "y").0, "regression");
    }

    /// Whole numbers of 10 values or more are binned where the training rows are 100 per
    /// bin or more; a heavy tail of a regression is scaled robustly; decimals stay as they are.
    #[test]
    fn scaling_follows_the_values_and_the_rows() {
        let column = |whole: Option<usize>, tail: Option<f64>| infer::Inferred {
            name: "c".into(),
            kind: ColumnKind::Numeric,
            missing: 0,
            values: String::new(),
            why: String::new(),
            embed: None,
            tail,
            whole,
            scaling: Scaling::Standard,
        };
        let chosen = |mut c: infer::Inferred, task: &str, rows: usize| {
            choose_scaling(&mut c, task, None, rows);
            (c.scaling, c.why)
        };
        let (scaling, why) = chosen(column(Some(31), Some(12.0)), "binary", 1_600);
        assert_eq!(scaling, Scaling::PiecewiseLinear);
        assert_eq!(
            why,
            "31 distinct whole numbers: piecewise-linear, up to 16 quantile bins"
        );
        assert_eq!(
            chosen(column(Some(31), None), "binary", 1_599).0,
            Scaling::Standard
        );
        assert_eq!(
            chosen(column(Some(9), None), "binary", 9_000).0,
            Scaling::Standard
        );
        let (scaling, why) = chosen(column(None, Some(12.0)), "regression", 9_000);
        assert_eq!(scaling, Scaling::Robust);
        assert!(why.ends_with("scaled robustly"), "{why}");
        assert_eq!(
            chosen(column(None, None), "regression", 9_000).0,
            Scaling::Standard
        );
        assert_eq!(
            chosen(column(None, Some(12.0)), "binary", 9_000).0,
            Scaling::Standard
        );
    }

    #[test]
    fn batches_fit_the_data() {
        assert_eq!(batch_size(100), 16);
        assert_eq!(batch_size(3_200), 64);
        assert_eq!(batch_size(1_000_000), 256);
    }

    /// Blocks are added while the maps keep 7 pixels on a side; small images get an MLP.
    #[test]
    fn images_of_16_pixels_or_more_get_a_convolutional_network() {
        let blocks = |h, w| {
            image_network(h, w, 50_000)
                .toml
                .matches("[[model.conv]]")
                .count()
        };
        assert_eq!(
            [
                blocks(28, 28),
                blocks(16, 16),
                blocks(32, 48),
                blocks(64, 64)
            ],
            [2, 1, 2, 3]
        );
        let small = image_network(12, 40, 100);
        assert!(small.toml.contains("hidden = [256, 128]") && !small.toml.contains("conv"));
        assert!(
            small.why.starts_with("an MLP on the pixels"),
            "{}",
            small.why
        );
        let fashion = image_network(28, 28, 800);
        assert!(
            fashion.why.contains("(16, 32 channels) leave 7x7 maps"),
            "{}",
            fashion.why
        );
        assert!(fashion.toml.contains("# [model.augment]") && fashion.why.contains("offered"));
        assert!(!image_network(28, 28, 50_000).toml.contains("augment"));
    }
}
