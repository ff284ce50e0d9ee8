//! Real tables through the CLI: text categories, missing cells, dates and ID columns, typed by
//! `[data.columns]`. Generated tables whose answer sits in one kind of column (a category, a
//! column's missingness, a date's weekday) must be learned from it; the Palmer penguins tables
//! (examples/) must draft, train and predict as `ember init` leaves them.

mod common;

use common::{Lcg, bad_input, config, ember, model_valid, ok, path_str, scratch, stderr, stdout};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One of `from`, uniformly.
fn pick<'a>(rng: &mut Lcg, from: &[&'a str]) -> &'a str {
    from[(rng.next() * from.len() as f64) as usize]
}

const CITIES: [&str; 5] = ["Oslo", "Lima", "Pune", "Kobe", "Rome"];

/// The job `ember init` drafts for `csv`, with `epochs` set; its stderr too.
fn drafted(dir: &Path, csv: &Path, label: &str, epochs: usize) -> (PathBuf, String) {
    common::drafted_as(dir, "job.toml", csv, label, epochs)
}

/// The validation accuracy of a run's model (its last epoch, or its best where restored).
fn valid_accuracy(run: &Path) -> f64 {
    model_valid(run, "accuracy")
}

/// The R² that `ember eval` reports for a regression run's validation split, and all it said.
fn eval_r2(run: &Path) -> (f64, String) {
    let eval = ember(&["eval", path_str(run), "--device", "cpu"]);
    ok(&eval);
    let said = stdout(&eval);
    let r2 = (said.split(" r2 ").nth(1))
        .and_then(|a| a.split([' ', ',']).next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no r2 in {said}"));
    (r2, said)
}

fn train(cfg: &Path, run: &Path) -> std::process::Output {
    common::train_on_cpu(cfg, run, &[])
}

/// The values of a run's first embedding table, from its model.safetensors.
fn table(run: &Path) -> Vec<f32> {
    let bytes = std::fs::read(run.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let data = file.tensor("embeddings.0.weight").unwrap().data().to_vec();
    data.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn train_with(cfg: &Path, run: &Path, extra: &[&str]) -> std::process::Output {
    common::train_on_cpu(cfg, run, extra)
}

/// Rows whose class is the city's (two cities per class), with a noise column that has empty
/// cells and a label missing in every 50th row.
fn city_table(path: &Path, rows: usize, seed: u64) {
    let mut rng = Lcg(seed);
    let mut text = String::from("id,noise,city,label\n");
    for i in 0..rows {
        let city = pick(&mut rng, &CITIES);
        let class = ["north", "south", "east"][CITIES.iter().position(|c| *c == city).unwrap() % 3];
        let noise = match rng.next() < 0.2 {
            true => String::new(),
            false => format!("{:.3}", rng.next()),
        };
        let label = if i % 50 == 49 { "NA" } else { class };
        writeln!(text, "{},{noise},{city},{label}", 5000 + i).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_text_category_alone_decides_the_class() {
    let dir = scratch("tables-city");
    let data = dir.join("cities.csv");
    city_table(&data, 800, 1);
    let (cfg, why) = drafted(&dir, &data, "label", 12);
    let job = std::fs::read_to_string(&cfg).unwrap();
    for line in [
        "[data.columns]",
        "id = \"ignore\"  # an ID: a different integer in every row",
        "noise = \"numeric\"",
        "city = \"category\"",
    ] {
        assert!(job.contains(line), "{line:?} not in\n{job}");
    }
    assert!(
        why.contains("16 rows without a label will be left out"),
        "{why}"
    );
    assert!(
        why.contains("city    category        0  5 levels: Kobe, Lima, Oslo, Pune, …"),
        "{why}"
    );
    let run = dir.join("run");
    let out = train(&cfg, &run);
    ok(&out);
    let acc = valid_accuracy(&run);
    assert!(acc >= 0.99, "valid accuracy {acc}");
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(resolved.contains("[[data.encoding]]"), "{resolved}");
    assert!(
        resolved.contains("levels = [\"Kobe\", \"Lima\", \"Oslo\", \"Pune\", \"Rome\"]"),
        "{resolved}"
    );
    let summary = std::fs::read_to_string(run.join("summary.json")).unwrap();
    assert!(summary.contains("\"rows_without_label\": 16"), "{summary}");

    // Predict on rows with an unseen city, a missing city and missing noise: answers, no error;
    // --keep copies the id into the output.
    let new = config(
        &dir,
        "new.csv",
        "label,city,noise,id\n,Oslo,,1\n,Paris,0.5,2\n,,,3\nsouth,Lima,0.1,4\n",
    );
    let out = ember(&[
        "predict",
        path_str(&run),
        "--input",
        path_str(&new),
        "--keep",
        "id",
        "--device",
        "cpu",
    ]);
    ok(&out);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "id,class,p_east,p_north,p_south");
    assert!(lines[1].starts_with("1,north,"), "{text}");
    assert!(lines[4].starts_with("4,south,"), "{text}");
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        stderr(&out).contains("encoded as (other): 1 in \"city\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_missing_indicator_carries_a_label_decided_by_missingness() {
    let dir = scratch("tables-missingness");
    let mut rng = Lcg(7);
    let mut text = String::from("x,z,y\n");
    for _ in 0..900 {
        let gone = rng.next() < 0.5;
        let x = if gone {
            "?".to_string()
        } else {
            format!("{:.2}", rng.next())
        };
        writeln!(
            text,
            "{x},{:.2},{}",
            rng.next(),
            ["kept", "lost"][usize::from(gone)]
        )
        .unwrap();
    }
    let data = config(&dir, "gone.csv", &text);
    let (cfg, _) = drafted(&dir, &data, "y", 10);
    let run = dir.join("run");
    ok(&train(&cfg, &run));
    let acc = valid_accuracy(&run);
    assert!(acc >= 0.99, "valid accuracy {acc}");
    // eval --json: the binary report's ROC AUC and per-class support.
    let eval = ember(&["eval", path_str(&run), "--json", "--device", "cpu"]);
    ok(&eval);
    let json: serde_json::Value = serde_json::from_str(&stdout(&eval)).unwrap();
    assert_eq!(json["evaluated"], "valid");
    let auc = json["report"]["roc_auc"].as_f64().unwrap();
    assert!(auc >= 0.99, "ROC AUC {auc}");
    let support: u64 = (0..2)
        .map(|c| json["report"]["classes"][c]["support"].as_u64().unwrap())
        .sum();
    assert_eq!(support, json["rows"].as_u64().unwrap());
}

#[test]
fn a_dates_weekday_decides_the_label() {
    let dir = scratch("tables-weekday");
    let mut rng = Lcg(3);
    let mut text = String::from("day,amount,kind\n");
    // Days from 2021-01-04 (a Monday) on, in ISO date-times.
    let monday = chrono::NaiveDate::from_ymd_opt(2021, 1, 4).unwrap();
    for _ in 0..1000 {
        let offset = (rng.next() * 700.0) as i64;
        let day = monday + chrono::Days::new(offset as u64);
        let weekend = offset % 7 >= 5;
        writeln!(
            text,
            "{}T10:00:00,{:.1},{}",
            day.format("%Y-%m-%d"),
            rng.next() * 100.0,
            ["weekday", "weekend"][usize::from(weekend)]
        )
        .unwrap();
    }
    let data = config(&dir, "days.csv", &text);
    let (cfg, why) = drafted(&dir, &data, "kind", 25);
    assert!(why.contains("day     date"), "{why}");
    let run = dir.join("run");
    ok(&train(&cfg, &run));
    let acc = valid_accuracy(&run);
    assert!(acc >= 0.99, "valid accuracy {acc}");
}

#[test]
fn the_raw_penguins_table_drafts_trains_and_predicts() {
    let dir = scratch("tables-penguins");
    let data = common::root().join("examples/penguins-raw.csv");
    let (cfg, why) = drafted(&dir, &data, "Species", 30);
    let job = std::fs::read_to_string(&cfg).unwrap();
    for line in [
        "\"Individual ID\" = \"ignore\"  # an ID: named so, and mostly different in every row",
        "Comments = \"category\"",
        "Region = \"ignore\"  # the same value in every row",
        "\"Date Egg\" = \"date\"",
        "\"Clutch Completion\" = \"category\"  # yes/no values",
        "Sex = \"category\"",
        "\"Culmen Length (mm)\" = \"numeric\"",
    ] {
        assert!(job.contains(line), "{line:?} not in\n{job}");
    }
    assert!(why.contains("inferred task = \"classification\""), "{why}");
    let run = dir.join("run");
    let out = train(&cfg, &run);
    ok(&out);
    let acc = valid_accuracy(&run);
    assert!(acc >= 0.97, "valid accuracy {acc}");

    // eval --data and predict read the same file with the run's encoding.
    let eval = ember(&[
        "eval",
        path_str(&run),
        "--data",
        path_str(&data),
        "--device",
        "cpu",
    ]);
    ok(&eval);
    let report = stdout(&eval);
    assert!(
        report.contains("penguins-raw.csv: loss") && report.contains("(344 rows"),
        "{report}"
    );
    for part in [
        "class",
        "precision  recall     f1  support",
        "confusion (rows: true class",
    ] {
        assert!(report.contains(part), "{part:?} not in\n{report}");
    }
    let predict = ember(&[
        "predict",
        path_str(&run),
        "--input",
        path_str(&data),
        "--keep",
        "Individual ID",
        "--device",
        "cpu",
    ]);
    ok(&predict);
    let text = stdout(&predict);
    assert!(text.starts_with("Individual ID,class,"), "{text}");
    assert_eq!(text.lines().count(), 345);
}

/// A run whose config lost its `[[data.encoding]]` (deleted by hand, as a config error's
/// message suggests for training) evaluates another file as the numbers of its columns, as
/// before typed tables parsed their columns while reading: no panic on a column parsed as read
/// but then taken as text.
#[test]
fn a_run_without_its_encoding_evaluates_a_file_as_numbers() {
    let dir = scratch("tables-no-encoding");
    let wine = common::root().join("examples/wine.csv");
    let (cfg, _) = drafted(&dir, &wine, "cultivar", 1);
    let run = dir.join("run");
    ok(&train(&cfg, &run));
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    let tables: Vec<&str> = resolved.split_inclusive('\n').collect();
    // Every table but the [[data.encoding]] ones, each running to the next header.
    let mut kept = String::new();
    let mut in_encoding = false;
    for line in tables {
        if line.starts_with('[') {
            in_encoding = line.starts_with("[[data.encoding]]");
        }
        if !in_encoding {
            kept.push_str(line);
        }
    }
    assert!(resolved.contains("[[data.encoding]]") && !kept.contains("data.encoding"));
    std::fs::write(run.join("config.toml"), kept).unwrap();
    let eval = ember(&[
        "eval",
        path_str(&run),
        "--data",
        path_str(&wine),
        "--device",
        "cpu",
    ]);
    ok(&eval);
    assert!(stdout(&eval).contains("(178 rows"), "{}", stdout(&eval));
}

#[test]
fn bad_typed_tables_get_one_line() {
    let dir = scratch("tables-bad");
    let data = config(
        &dir,
        "d.csv",
        "when,n,y\n2024-01-01,1,a\n2024-02-30,2,b\n2024-01-03,3,a\n",
    );
    let job = |columns: &str| {
        let text = format!(
            "task = \"classification\"\nepochs = 1\n[data]\ncsv = \"{}\"\nlabel = \"y\"\n[data.columns]\n{columns}\n[model]\nhidden = [8]\n[adam]\nlr = 0.01\n",
            data.display()
        );
        config(&dir, "bad.toml", &text)
    };
    let run = dir.join("run");
    bad_input(
        &train(&job("when = \"date\"\nn = \"numeric\""), &run),
        "d.csv: line 3: column \"when\" (date) holds \"2024-02-30\", not a date",
    );
    bad_input(
        &train(&job("n = \"numeric\""), &run),
        "column \"when\" has no type in data.columns",
    );
    bad_input(
        &train(
            &job("when = \"ignore\"\nn = \"numeric\"\nheight = \"numeric\""),
            &run,
        ),
        "no column named \"height\" (data.columns)",
    );
    bad_input(
        &train(&job("when = \"ignore\"\nn = \"text\""), &run),
        "unknown variant `text`",
    );
    let embedded = |embed: &str| {
        job(&format!(
            "when = \"ignore\"\nn = \"numeric\"\n[data.embed]\n{embed}"
        ))
    };
    bad_input(
        &train(&embedded("n = 4"), &run),
        "data.embed names \"n\", which data.columns does not type \"category\"",
    );
    let category = "when = \"ignore\"\nn = \"category\"\n[data.embed]\nn = 0";
    bad_input(
        &train(&job(category), &run),
        "data.embed.n = 0: an embedding is 1 to 1024 wide",
    );
    assert!(!run.join("model.mpk").exists());
}

#[test]
fn a_target_in_dollars_trains_standardised_and_reports_in_dollars() {
    let dir = scratch("tables-dollars");
    let mut rng = Lcg(11);
    let mut text = String::from("size,city,price\n");
    for _ in 0..1200 {
        let size = 40.0 + 160.0 * rng.next();
        let city = pick(&mut rng, &CITIES);
        let premium = 40_000.0 * CITIES.iter().position(|c| *c == city).unwrap() as f64;
        let price = 80_000.0 + 2_500.0 * size + premium + 5_000.0 * (rng.next() - 0.5);
        writeln!(text, "{size:.1},{city},{price:.0}").unwrap();
    }
    let data = config(&dir, "homes.csv", &text);
    let (cfg, why) = drafted(&dir, &data, "price", 40);
    assert!(why.contains("inferred task = \"regression\""), "{why}");
    assert!(
        std::fs::read_to_string(&cfg)
            .unwrap()
            .contains("standardize_target = true")
    );
    let run = dir.join("run");
    ok(&train(&cfg, &run));
    let r2 = model_valid(&run, "r2");
    assert!(r2 >= 0.97, "valid R² {r2}");
    // The loss and MAE are in dollars: a standard deviation of about 130,000 dollars, an R²
    // near 1, so an MAE of thousands and a mean squared error of millions.
    let (mse, mae) = (model_valid(&run, "loss"), model_valid(&run, "mae"));
    assert!(mae > 300.0 && mae < 20_000.0, "MAE {mae}");
    assert!(mse > mae * mae, "MSE {mse}, MAE {mae}");
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(resolved.contains("target_std = "), "{resolved}");

    let eval = ember(&["eval", path_str(&run), "--device", "cpu"]);
    ok(&eval);
    let line = stdout(&eval);
    // `loss L, mae M, r2 R`: the figures of the last validation pass, in dollars.
    let figure = |name: &str| -> f64 {
        let after = line.split(&format!(" {name} ")).nth(1).unwrap();
        after.split([' ', ',']).next().unwrap().parse().unwrap()
    };
    for (name, last) in [("loss", mse), ("mae", mae), ("r2", r2)] {
        let got = figure(name);
        assert!(
            (got / last - 1.0).abs() < 1e-3,
            "eval {name} {got}, last valid {name} {last}: {line}"
        );
    }

    let homes = config(&dir, "new.csv", "size,city\n100,Oslo\n100,Rome\n");
    let out = ember(&[
        "predict",
        path_str(&run),
        "--input",
        path_str(&homes),
        "--device",
        "cpu",
    ]);
    ok(&out);
    let values: Vec<f64> = stdout(&out)
        .lines()
        .skip(1)
        .map(|l| l.parse().unwrap())
        .collect();
    // 80,000 + 250,000, and Rome's 160,000 more.
    assert!((values[0] - 330_000.0).abs() < 15_000.0, "{values:?}");
    assert!((values[1] - 490_000.0).abs() < 15_000.0, "{values:?}");
}

/// A column that holds one value in every training row (here: after the split sent the one row
/// that differs to validation, and in a training file of its own) is a warning naming it, not
/// an error; the run trains.
#[test]
fn a_column_constant_in_training_is_a_warning() {
    let dir = scratch("tables-constant");
    let mut text = String::from("x,flag,city,label\n");
    for i in 0..50 {
        let x = (i * 37 % 50) as f64 / 50.0;
        let flag = if i == 0 { 7 } else { 5 };
        writeln!(text, "{x},{flag},Oslo,{}", u8::from(x > 0.5)).unwrap();
    }
    let data = dir.join("flags.csv");
    std::fs::write(&data, text).unwrap();
    let job = |extra: &str| {
        let text = format!(
            "task = \"binary\"\nepochs = 2\n[model]\nhidden = [4]\n[adam]\nlr = 1e-2\n\
             [data]\ncsv = \"{}\"\nlabel = \"label\"\nstandardize = true\nvalid_fraction = 0.2\n{extra}\
             [data.columns]\nx = \"numeric\"\nflag = \"numeric\"\ncity = \"category\"\n",
            data.display()
        );
        config(&dir, "job.toml", &text)
    };
    // Split seed 5 holds out row 0, the only one whose flag is not 5.
    let out = train(&job("split_seed = 5\n"), &dir.join("split"));
    ok(&out);
    let warning = format!(
        "warning: {}: columns \"flag\", \"city\" give the same inputs in all 40 training rows",
        data.display()
    );
    assert!(stderr(&out).contains(&warning), "{}", stderr(&out));
    // Another split seed keeps row 0 in training: only the city is constant.
    let out = train(&job("split_seed = 1\n"), &dir.join("kept"));
    ok(&out);
    assert!(
        stderr(&out).contains("column \"city\" gives the same inputs in all 40 training rows"),
        "{}",
        stderr(&out)
    );
}

/// A rare class (1 row in 10) that one overlapping column predicts: unweighted, the model
/// leans to the common class; `class_weight = "balanced"` must raise the rare class's recall
/// and the balanced accuracy, print its weights, and keep them in the run's config.toml.
#[test]
fn balanced_class_weights_lift_the_rare_class() {
    let dir = scratch("tables-class-weight");
    let mut rng = Lcg(11);
    let mut text = String::from("x,noise,label\n");
    for _ in 0..3000 {
        let rare = rng.next() < 0.1;
        // Box-Muller normal, shifted by 1.5 deviations for the rare class.
        let z =
            (-2.0 * (1.0 - rng.next()).ln()).sqrt() * (std::f64::consts::TAU * rng.next()).cos();
        let x = z + if rare { 1.5 } else { 0.0 };
        let label = if rare { "yes" } else { "no" };
        writeln!(text, "{x:.4},{:.4},{label}", rng.next()).unwrap();
    }
    let data = config(&dir, "rare.csv", &text);
    // init offers the weights, commented out, and the job trains with them uncommented.
    let init = ember(&["init", "--csv", path_str(&data), "--label", "label"]);
    ok(&init);
    assert!(
        stderr(&init).contains("classes imbalanced (\"yes\": "),
        "{}",
        stderr(&init)
    );
    let drafted = stdout(&init).replace("# class_weight = ", "class_weight = ");
    assert!(
        drafted.contains("\nclass_weight = \"balanced\"\n"),
        "{drafted}"
    );
    let cfg = config(&dir, "drafted.toml", &drafted);
    ok(&train(&cfg, &dir.join("drafted")));
    let job = |extra: &str| {
        let text = format!(
            "task = \"binary\"\nepochs = 8\nbatch_size = 64\n{extra}[model]\nhidden = [8]\n\
             [adam]\nlr = 1e-2\n[data]\ncsv = \"{}\"\nlabel = \"label\"\nstandardize = true\n\
             valid_fraction = 0.3\n[data.columns]\nx = \"numeric\"\nnoise = \"numeric\"\n",
            data.display()
        );
        config(&dir, "job.toml", &text)
    };
    let report = |run: &Path| -> serde_json::Value {
        let eval = ember(&["eval", path_str(run), "--json", "--device", "cpu"]);
        ok(&eval);
        serde_json::from_str::<serde_json::Value>(&stdout(&eval)).unwrap()["report"].clone()
    };
    let recall = |r: &serde_json::Value| r["classes"][1]["recall"].as_f64().unwrap();
    // Not quiet: the weights are printed with the data's lines.
    let loud = |cfg: &Path, run: &Path| {
        ember(&[
            "train",
            path_str(cfg),
            "--device",
            "cpu",
            "--out",
            path_str(run),
        ])
    };
    let plain = dir.join("plain");
    ok(&train(&job(""), &plain));
    let weighted = dir.join("balanced");
    let out = loud(&job("class_weight = \"balanced\"\n"), &weighted);
    ok(&out);
    let line = "class weights (balanced, training loss only): no 0.5";
    assert!(stdout(&out).contains(line), "{}", stdout(&out));
    let (a, b) = (report(&plain), report(&weighted));
    assert!(
        recall(&b) >= recall(&a) + 0.2,
        "recall of yes: {a} then {b}"
    );
    let balanced = |r: &serde_json::Value| r["balanced_accuracy"].as_f64().unwrap();
    assert!(balanced(&b) > balanced(&a), "{a} then {b}");
    // The weights are written into the run, and a resumed or evaluated run reads them back.
    let saved = std::fs::read_to_string(weighted.join("config.toml")).unwrap();
    assert!(saved.contains("class_weight = \"balanced\""), "{saved}");
    assert!(saved.contains("class_weights = [0.5"), "{saved}");
    // Given weights name classes; a typo, or a class weight on a regression, is one line.
    let out = loud(&job("[class_weight]\nyes = 9.0\n"), &dir.join("given"));
    ok(&out);
    assert!(stdout(&out).contains("class weights (given, training loss only): no 1, yes 9"));
    bad_input(
        &train(&job("[class_weight]\nmaybe = 2.0\n"), &dir.join("typo")),
        "class_weight names \"maybe\", which is not a class of the labels (no, yes)",
    );
    let regression = std::fs::read_to_string(job("class_weight = \"balanced\"\n"))
        .unwrap()
        .replace("\"binary\"", "\"regression\"")
        .replace("label = \"label\"", "label = \"x\"")
        .replace("x = \"numeric\"\n", "label = \"category\"\n");
    let cfg = config(&dir, "regression.toml", &regression);
    bad_input(
        &train(&cfg, &dir.join("regression")),
        "class_weight is for classification and binary tasks",
    );
}

/// Rows whose class is their shop's (300 shops, 20 rows each, in a random order), beside a
/// noise column: one-hot inputs for the 64 commonest shops could reach about half of them.
fn shop_table(path: &Path, rows: usize, seed: u64) {
    let mut rng = Lcg(seed);
    let mut text = String::from("noise,shop,label\n");
    for i in 0..rows {
        let shop = (i * 7919 + (rng.next() * 3.0) as usize) % 300;
        let label = ["red", "green", "blue"][(shop * 31 + shop / 7) % 3];
        writeln!(text, "{:.3},s{shop:03},{label}", rng.next()).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

/// A category of 300 levels that alone decides the class: `init` embeds it, training learns
/// it, and a shop never seen (or a missing one) at predict time gets an answer.
#[test]
fn a_category_of_many_levels_is_embedded_and_decides_the_class() {
    let dir = scratch("tables-shops");
    let data = dir.join("shops.csv");
    shop_table(&data, 6000, 5);
    let (cfg, why) = drafted(&dir, &data, "label", 30);
    // Without the drafted early stop, which replicas (below) do not take.
    let job = std::fs::read_to_string(&cfg).unwrap();
    let stop = job
        .find("\n# Ends the run after")
        .expect("an early stop is drafted");
    let end = stop + job[stop..].find("restore_best = true\n").unwrap() + 20;
    let job = format!("{}{}", &job[..stop], &job[end..]);
    std::fs::write(&cfg, &job).unwrap();
    assert!(job.contains("[data.embed]\nshop = 9\n"), "{job}");
    assert!(
        why.contains("300 levels in 3+ rows, over one-hot's 64: embedded, 9 wide"),
        "{why}"
    );
    let run = dir.join("run");
    let (c, r) = (path_str(&cfg), path_str(&run));
    let out = ember(&["train", c, "--device", "cpu", "--out", r]);
    ok(&out);
    let log = stdout(&out) + &stderr(&out);
    assert!(
        log.contains("1 category -> 1 (embedded: \"shop\" 302 rows x 9)"),
        "{log}"
    );
    let acc = valid_accuracy(&run);
    assert!(acc >= 0.99, "valid accuracy {acc}");
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(resolved.contains("embed = 9"), "{resolved}");

    // Two seeds of it as replicas of one batched model: each trial's losses are its single
    // run's, within float rounding (each replica looks up its own tables).
    let sweep = format!("base = \"{}\"\nseeds = [1, 2]\n", cfg.display());
    let sweep = config(&dir, "sweep.toml", &sweep);
    let swept = dir.join("sweep");
    let (s, o) = (path_str(&sweep), path_str(&swept));
    ok(&ember(&[
        "--threads",
        "2",
        "sweep",
        "run",
        s,
        "--out",
        o,
        "--device",
        "cpu",
    ]));
    let log = std::fs::read_to_string(swept.join("logs/unit-000.log")).unwrap();
    assert!(log.contains("2 trials as replicas"), "{log}");
    for (i, seed) in ["seed=1", "seed=2"].iter().enumerate() {
        let single = dir.join(format!("single-{i}"));
        ok(&train_with(
            &cfg,
            &single,
            &["--set", seed, "--set", "data.split_seed=42"],
        ));
        let trial = swept.join(format!("trial-{i:03}"));
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-5 * y.abs().max(1.0);
        for (a, b) in common::losses(&trial).iter().zip(&common::losses(&single)) {
            assert!(
                close(a.0, b.0) && close(a.1, b.1),
                "trial {i}: {a:?} vs {b:?}"
            );
        }
        // The trial's saved table is its replica's, trained as the single run trained its own.
        let (ours, theirs) = (table(&trial), table(&single));
        assert_eq!(ours.len(), theirs.len());
        let worst = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(
            worst < 1e-3,
            "trial {i}: its table differs from the single run's by {worst}"
        );
    }

    // The one-hot encoding of the same column, for contrast: its 64 shops are not enough.
    let onehot = config(
        &dir,
        "onehot.toml",
        &job.replace("[data.embed]\nshop = 9\n", ""),
    );
    let run_onehot = dir.join("onehot");
    ok(&train(&onehot, &run_onehot));
    let acc_onehot = valid_accuracy(&run_onehot);
    assert!(acc_onehot < 0.8, "one-hot valid accuracy {acc_onehot}");

    let new = config(&dir, "new.csv", "shop,noise\ns004,0.5\nParis,0.1\n,0.2\n");
    let out = ember(&[
        "predict",
        path_str(&run),
        "--input",
        path_str(&new),
        "--device",
        "cpu",
    ]);
    ok(&out);
    let text = stdout(&out);
    let want = ["red", "green", "blue"][(4 * 31) % 3];
    assert!(text.lines().nth(1).unwrap().starts_with(want), "{text}");
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(stderr(&out).contains("1 in \"shop\""), "{}", stderr(&out));
}

/// Rows whose class is their person's, the people given as integer codes (300 of them, 20 rows
/// each, in a random order), beside a noise column.
fn person_table(path: &Path, rows: usize, seed: u64) {
    let mut rng = Lcg(seed);
    let mut text = String::from("noise,person_id,label\n");
    for i in 0..rows {
        let person = (i * 7919 + (rng.next() * 3.0) as usize) % 300;
        let label = ["red", "green", "blue"][(person * 31 + person / 7) % 3];
        writeln!(text, "{:.3},{},{label}", rng.next(), 4000 + 17 * person).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

/// Integer codes of people: `init` keeps them numeric but says they look like codes and what
/// to do; `init --category` makes them an embedded category, which training learns; a column
/// the file lacks is one line.
#[test]
fn integer_codes_are_flagged_and_init_category_makes_them_a_category() {
    let dir = scratch("tables-codes");
    let data = dir.join("people.csv");
    person_table(&data, 6000, 7);
    let (csv, flag) = (path_str(&data), "--category");
    let out = ember(&["init", "--csv", csv, "--label", "label"]);
    ok(&out);
    let hint = "integer codes? 300 different values, named or spelled like codes: `ember init --category person_id` makes it a category";
    assert!(
        stdout(&out).contains(&format!("person_id = \"numeric\"  # {hint}")),
        "{}",
        stdout(&out)
    );
    assert!(stderr(&out).contains(hint), "{}", stderr(&out));
    // As numbers, the codes' order says nothing of the class.
    let numeric = common::with_epochs(&stdout(&out), 30);
    let (cfg, run) = (config(&dir, "numeric.toml", &numeric), dir.join("numeric"));
    ok(&train(&cfg, &run));
    let acc = valid_accuracy(&run);
    assert!(acc < 0.6, "valid accuracy as numbers {acc}");

    let out = ember(&["init", "--csv", csv, "--label", "label", flag, "person_id"]);
    ok(&out);
    let job = common::with_epochs(&stdout(&out), 30);
    assert!(job.contains("--label label --category person_id"), "{job}");
    assert!(job.contains("person_id = \"category\"  # a category by --category; 300 levels in 3+ rows, over one-hot's 64: embedded, 9 wide"), "{job}");
    assert!(job.contains("[data.embed]\nperson_id = 9\n"), "{job}");
    let (cfg, run) = (config(&dir, "job.toml", &job), dir.join("run"));
    ok(&train(&cfg, &run));
    let acc = valid_accuracy(&run);
    assert!(acc >= 0.99, "valid accuracy {acc}");

    let out = ember(&["init", "--csv", csv, "--label", "label", flag, "person"]);
    bad_input(&out, "--category");
    assert!(stderr(&out).contains("\"person\""), "{}", stderr(&out));
    let out = ember(&["init", "--csv", csv, "--label", "label", flag, "label"]);
    bad_input(&out, "--category label names the --label column");
}

/// An embedded table's run, killed in its third epoch, resumes to the uninterrupted run's
/// weights and losses, bit for bit (the tables and their Adam moments are in the checkpoint);
/// `--init-from` its model starts a new run where it ended.
#[test]
fn an_embedded_table_resumes_bit_for_bit_and_seeds_another_run() {
    use common::{kill_mid_epoch, losses, spawn};
    use std::time::Duration;
    let dir = scratch("tables-shops-resume");
    let data = dir.join("shops.csv");
    shop_table(&data, 3000, 9);
    let (cfg, _) = drafted(&dir, &data, "label", 5);
    let job = std::fs::read_to_string(&cfg).unwrap();
    assert!(job.contains("[data.embed]\nshop = 4\n"), "{job}");
    // Batches of 1: epochs long enough to be killed in.
    let train_args = |out: &Path| {
        let mut a = vec!["train", path_str(&cfg), "--out", path_str(out), "-q"];
        a.extend([
            "--device",
            "cpu",
            "--checkpoint-every",
            "0",
            "--set",
            "batch_size=1",
        ]);
        a.into_iter().map(String::from).collect::<Vec<String>>()
    };
    let (reference, killed) = (dir.join("reference"), dir.join("killed"));
    let reference_args = train_args(&reference);
    ok(&ember(
        &reference_args
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    ));
    let killed_args = train_args(&killed);
    let child = spawn(&killed_args.iter().map(String::as_str).collect::<Vec<_>>());
    // Half of the reference run's third epoch after the second's checkpoint: in epoch 3 however
    // fast the machine, as tests/cnn.rs waits.
    let epoch_3 = common::metric(&reference, "seconds", |r| r[..2] == ["3", "train"]);
    let settle = Duration::from_secs_f64(epoch_3 / 2.0);
    kill_mid_epoch(child, &killed, 2, Duration::from_secs(120), settle);
    ok(&common::resume_on_cpu(&killed));
    let weights = |run: &Path| std::fs::read(run.join("model.safetensors")).unwrap();
    assert!(
        weights(&killed) == weights(&reference),
        "resumed weights differ"
    );
    assert_eq!(losses(&killed), losses(&reference));
    // PyTorch's names: a ModuleList of nn.Embedding beside the nn.Sequential, whose first
    // layer reads the noise column and the shop's 4 values.
    let bytes = weights(&reference);
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let shape = |name: &str| file.tensor(name).unwrap().shape().to_vec();
    assert_eq!(shape("embeddings.0.weight"), [302, 4]);
    assert_eq!(shape("net.0.weight"), [64, 5]);

    // A model file beside a config whose encoding has other levels: one line, no panic.
    let edited = dir.join("edited");
    std::fs::create_dir_all(&edited).unwrap();
    std::fs::copy(reference.join("model.mpk"), edited.join("model.mpk")).unwrap();
    let resolved = std::fs::read_to_string(reference.join("config.toml")).unwrap();
    let fewer = resolved.replacen("\"s000\", ", "", 1);
    assert_ne!(fewer, resolved);
    let model = edited.join("model.mpk");
    let rows = config(&dir, "rows.csv", "noise,shop,label\n0.5,s001,red\n");
    // The model evaluated beside `config_text`: one line containing `needle`.
    let refused = |config_text: &str, needle: &str| {
        std::fs::write(edited.join("config.toml"), config_text).unwrap();
        let (model, rows) = (path_str(&model), path_str(&rows));
        let o = ember(&["eval", model, "--data", rows, "--device", "cpu"]);
        bad_input(&o, needle);
    };
    refused(
        &fewer,
        "its embedding tables are [[302, 4]] (rows, width), but the config's data.encoding gives [[301, 4]]",
    );
    // The same config without the embedding (the shop one-hot, the inputs counted anew): one
    // line, where Burn's loading stopped the process on the other count of tables.
    let one_hot = (resolved.replacen("[data.embed]\nshop = 4\n", "", 1))
        .replacen("embed = 4\n", "", 1)
        .replacen("inputs = 2\n", "inputs = 303\n", 1);
    assert!(!one_hot.contains("embed") && one_hot.contains("inputs = 303"));
    refused(
        &one_hot,
        "model.mpk: the model file has 1 embedding table where the config (data.embed) gives 0",
    );

    let (seeded, fresh) = (dir.join("seeded"), dir.join("fresh"));
    let from = reference.join("model.safetensors");
    let one_epoch = ["--set", "epochs=1"];
    let from_reference = ["--init-from", path_str(&from), "--set", "epochs=1"];
    ok(&train_with(&cfg, &seeded, &from_reference));
    ok(&train_with(&cfg, &fresh, &one_epoch));
    let first_valid_loss = |run: &Path| losses(run)[0].1;
    let (a, b) = (first_valid_loss(&seeded), first_valid_loss(&fresh));
    assert!(
        a < b / 4.0,
        "valid loss after one epoch: {a} from the model, {b} from scratch"
    );
}

/// Seattle's daily weather (examples/): rain is 0 on most days and up to 56 mm on a few, a
/// heavy tail. Predicting the day's high temperature (a regression whose target is not
/// heavy-tailed), `init` scales the rain robustly; eval and predict apply the fit, so that a
/// downpour beyond anything in training reaches the model clipped; a classifier keeps it.
#[test]
fn a_heavy_tail_is_scaled_robustly_where_init_drafts_it_and_predict_applies_it() {
    let dir = scratch("tables-heavy-tail");
    let weather = common::root().join("examples/seattle-weather.csv");
    let (cfg, why) = drafted(&dir, &weather, "temp_max", 10);
    let job = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        job.contains("[data.scaling]\nprecipitation = \"robust\"\n"),
        "{job}"
    );
    let line = |text: &str, column: &str| {
        let found = text.lines().find(|l| l.starts_with(column));
        found.unwrap_or_default().to_string()
    };
    assert!(
        line(&why, "precipitation ")
            .contains("interquartile ranges from the median: scaled robustly"),
        "{why}"
    );
    assert!(!line(&why, "temp_min ").contains("heavy"), "{why}");
    let run = dir.join("run");
    ok(&train(&cfg, &run));
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    // The file's median rain is 0 mm, its quartiles 0 and 2.8 mm.
    let fit = "[data.encoding.robust]\ncenter = 0.0\nscale = 2.8\n";
    assert!(resolved.contains(fit), "{resolved}");
    // eval encodes the validation rows as training did: the same R².
    let r2 = model_valid(&run, "r2");
    let (evaluated, said) = eval_r2(&run);
    assert!(r2 > 0.75 && (evaluated - r2).abs() < 1e-4, "{r2}: {said}");
    // Standardised as it is, 5,000 mm would sit a thousand deviations out; clipped, it is
    // nearly 500 mm's input, and both nearly 56 mm's.
    let rows = "date,precipitation,temp_min,wind,weather\n2016-07-01,56,12,3,rain\n2016-07-01,500,12,3,rain\n2016-07-01,5000,12,3,rain\n";
    let new = config(&dir, "downpours.csv", rows);
    let out = ember(&[
        "predict",
        path_str(&run),
        "--input",
        path_str(&new),
        "--device",
        "cpu",
    ]);
    ok(&out);
    let highs: Vec<f64> = stdout(&out)
        .lines()
        .skip(1)
        .map(|l| l.parse().unwrap())
        .collect();
    assert!(
        (highs[2] - highs[1]).abs() < 0.1 && (highs[1] - highs[0]).abs() < 1.0,
        "{highs:?}"
    );
    // A classifier of the day's weather keeps the rain as it is.
    let (cfg, why) = drafted(&dir, &weather, "weather", 1);
    assert!(
        line(&why, "precipitation ").contains("kept as it is for a classifier"),
        "{why}"
    );
    assert!(
        !std::fs::read_to_string(&cfg)
            .unwrap()
            .contains("[data.scaling]")
    );
    // A scaling for a category, or an encoding fitted without the scaling, is one line.
    let category = config(
        &dir,
        "bad.toml",
        &format!("{job}\n[data.scaling]\nweather = \"robust\"\n")
            .replace("[data.scaling]\nprecipitation = \"robust\"\n", ""),
    );
    bad_input(
        &train(&category, &dir.join("bad")),
        "data.scaling names \"weather\", which data.columns does not type \"numeric\"",
    );
    let unfitted = resolved.replace("[data.scaling]\nprecipitation = \"robust\"\n", "");
    let unfitted = config(&dir, "unfitted.toml", &unfitted);
    bad_input(
        &train(&unfitted, &dir.join("unfitted")),
        "data.encoding has \"precipitation\" fitted as \"robust\", but data.scaling asks for \"standard\"",
    );
}

/// New York flights (examples/): the month, the day, the scheduled times and the distance are
/// whole numbers of many values, which `init` drafts piecewise-linear (one input per quantile
/// bin), as the resolved config's bins say; the drafted run stops early and its model is the
/// best epoch's, which eval loads (the same R² as that epoch's) and predict applies.
#[test]
fn whole_numbers_are_binned_where_init_drafts_them_and_the_best_epoch_is_the_model() {
    let dir = scratch("tables-bins");
    let flights = common::root().join("examples/flights-3000.csv");
    let (cfg, why) = drafted(&dir, &flights, "arr_delay", 60);
    let job = std::fs::read_to_string(&cfg).unwrap();
    for column in [
        "month",
        "day",
        "sched_dep_time",
        "sched_arr_time",
        "distance",
    ] {
        assert!(
            job.contains(&format!("\n{column} = \"piecewise-linear\"\n")),
            "{job}"
        );
    }
    assert!(job.contains("[early_stopping]\npatience = 5\nrestore_best = true\n"));
    assert!(
        why.contains("31 distinct whole numbers: piecewise-linear, up to 16 quantile bins"),
        "{why}"
    );
    let run = dir.join("run");
    ok(&train(&cfg, &run));
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    // The months' edges: every month is a value of its own rank among the 16.
    let months = "bins = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]";
    assert!(resolved.contains(months), "{resolved}");
    let summary = common::summary(&run);
    assert_eq!(summary["model_epoch"], summary["best_epoch"]);
    assert!(summary["epochs_done"].as_u64() < Some(60), "{summary}");
    let (evaluated, said) = eval_r2(&run);
    let r2 = model_valid(&run, "r2");
    assert!(r2 > 0.05 && (evaluated - r2).abs() < 1e-4, "{r2}: {said}");
    let out = ember(&[
        "predict",
        path_str(&run),
        "--input",
        path_str(&flights),
        "--device",
        "cpu",
    ]);
    ok(&out);
    assert_eq!(stdout(&out).lines().count(), 3001);
}

/// `ember train --csv FILE --label COL` trains the job `ember init` drafts, keeps it in the run
/// folder as `job.toml` (the same text `init` prints), and takes `--set` like a job file; it
/// takes no job file beside it, and a bad override names the drafted job.
#[test]
fn train_csv_drafts_trains_and_keeps_the_drafted_job() {
    let dir = scratch("tables-train-csv");
    let penguins = common::root().join("examples/penguins.csv");
    let csv = path_str(&penguins);
    let init = ember(&["init", "--csv", csv, "--label", "species"]);
    ok(&init);
    let run = dir.join("run");
    let out = ember(&[
        "train",
        "--csv",
        csv,
        "--label",
        "species",
        "--out",
        path_str(&run),
        "--device",
        "cpu",
        "--set",
        "epochs=4",
    ]);
    ok(&out);
    assert!(
        stderr(&out).contains("inferred task = \"classification\""),
        "{}",
        stderr(&out)
    );
    let kept = std::fs::read_to_string(run.join("job.toml")).unwrap();
    assert_eq!(kept, stdout(&init));
    let summary = common::summary(&run);
    assert_eq!(
        (summary["status"].as_str(), summary["epochs_total"].as_u64()),
        (Some("complete"), Some(4))
    );
    let predict = ember(&["predict", path_str(&run), "--input", csv, "--device", "cpu"]);
    ok(&predict);
    let job = dir.join("job.toml");
    std::fs::write(&job, &kept).unwrap();
    let both = ember(&["train", path_str(&job), "--csv", csv, "--label", "species"]);
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));
    assert!(
        stderr(&both).contains("cannot be used with"),
        "{}",
        stderr(&both)
    );
    let bad = ember(&[
        "train",
        "--csv",
        csv,
        "--label",
        "species",
        "--out",
        path_str(&dir.join("bad")),
        "--set",
        "adam.lr=-1",
    ]);
    // The column report, then one line of error.
    assert_eq!(bad.status.code(), Some(2));
    let last = stderr(&bad).lines().last().unwrap_or_default().to_string();
    assert_eq!(
        last,
        "error: the drafted job: adam.lr = -1 must be a number greater than 0"
    );
    assert!(!dir.join("bad").exists());
}
