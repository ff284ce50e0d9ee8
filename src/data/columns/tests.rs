use super::infer::{Inferred, infer, read_sampling};
use super::*;
use crate::data::table::read_text;
use std::collections::BTreeMap;
use std::path::Path;

/// `text` as a CSV file named `name`, in a folder of its own (tests run in parallel and share
/// names).
fn csv(name: &str, text: &str) -> TextCsv {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    read_text(&crate::data::test_file(&format!("columns-{n}"), name, text)).unwrap()
}

/// The encodings [`fit_and_encode`] fits; the rows it encodes with them must be the rows
/// [`encode`] makes of the same file with the same encodings.
fn fit(csv: &TextCsv, inputs: &[(usize, ColumnKind)], missing: &Missing) -> Result<Vec<Encoding>> {
    fit_embedded(csv, inputs, missing, &Embed::default())
}

/// [`fit`] with `embed` (`[data.embed]`).
fn fit_embedded(
    csv: &TextCsv,
    inputs: &[(usize, ColumnKind)],
    missing: &Missing,
    embed: &Embed,
) -> Result<Vec<Encoding>> {
    fit_with(csv, inputs, missing, &(embed.clone(), Scalings::new()))
}

/// [`fit`] with `[data.embed]` and `[data.scaling]`, checked every way a table is encoded.
fn fit_with(
    csv: &TextCsv,
    inputs: &[(usize, ColumnKind)],
    missing: &Missing,
    (embed, scaling): &(Embed, Scalings),
) -> Result<Vec<Encoding>> {
    let fitted = fit_and_encode(csv, inputs, missing, embed, scaling, Layout::default());
    let bits = |m: &Matrix| m.values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    // The same file with its numeric and date columns parsed as it is read: the same
    // encodings and rows, or the same error; and encoded again, the same rows or error.
    let kinds: BTreeMap<String, ColumnKind> = (inputs.iter())
        .map(|(c, k)| (csv.header[*c].clone(), *k))
        .collect();
    let parsed = read_typed(&csv.path, &kinds, missing).unwrap();
    let as_read = fit_and_encode(&parsed, inputs, missing, embed, scaling, Layout::default());
    match (&fitted, &as_read) {
        (Ok(f), Ok(f2)) => {
            assert_eq!((&f.encodings, &f.unseen), (&f2.encodings, &f2.unseen));
            assert_eq!(bits(&f.matrix), bits(&f2.matrix));
            let (again, unseen_again) = encode(&parsed, &f.encodings, missing).unwrap();
            assert_eq!((bits(&again), &unseen_again), (bits(&f.matrix), &f.unseen));
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!("read as text and parsed as read differ: {fitted:?} / {as_read:?}"),
    }
    let Fitted {
        encodings,
        matrix: encoded,
        unseen,
        stats: None,
    } = fitted?
    else {
        panic!("standardised without being asked")
    };
    let (again, unseen_again) = encode(csv, &encodings, missing).unwrap();
    assert_eq!((encoded.rows, encoded.cols), (again.rows, again.cols));
    assert_eq!(bits(&encoded), bits(&again));
    assert_eq!(unseen, unseen_again);
    // Encoded in another order of the rows (as a split orders them): the same fit, the same rows.
    let reversed: Vec<usize> = (0..csv.rows()).rev().collect();
    let layout = Layout {
        order: Some(&reversed),
        standardize_on_first: None,
    };
    let r = fit_and_encode(csv, inputs, missing, embed, scaling, layout)?;
    assert_eq!((&r.encodings, &r.unseen), (&encodings, &unseen));
    assert_eq!(bits(&r.matrix), bits(&encoded.take(&reversed)));
    standardised_as_encoded(csv, inputs, missing, (embed, scaling), &encoded);
    Ok(encodings)
}

/// Standardised as they are encoded, the rows of `csv` (in a split's order: the odd rows, then
/// the even ones) are the bits that standardising the `encoded` rows with their training
/// rows' statistics gives, as `data::column_stats` and `data::apply_stats` do it.
fn standardised_as_encoded(
    csv: &TextCsv,
    inputs: &[(usize, ColumnKind)],
    missing: &Missing,
    (embed, scaling): (&Embed, &Scalings),
    encoded: &Matrix,
) {
    let order: Vec<usize> = (1..csv.rows())
        .step_by(2)
        .chain((0..csv.rows()).step_by(2))
        .collect();
    let train_rows = csv.rows() / 2;
    let layout = Layout {
        order: Some(&order),
        standardize_on_first: Some(train_rows),
    };
    let scaled = fit_and_encode(csv, inputs, missing, embed, scaling, layout).unwrap();
    let split = |rows: &[usize]| crate::data::HostSplit {
        features: encoded.take(rows),
        ..Default::default()
    };
    let mut expected = crate::data::column_stats(&split(&order[..train_rows]));
    let unscaled = unscaled_inputs(&scaled.encodings);
    for (c, _) in unscaled.iter().enumerate().filter(|(_, u)| **u) {
        (expected.mean[c], expected.std[c]) = (0.0, 1.0);
    }
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let stats = scaled.stats.expect("standardised");
    assert_eq!(bits(&stats.mean), bits(&expected.mean));
    assert_eq!(bits(&stats.std), bits(&expected.std));
    let mut all = split(&order);
    crate::data::apply_stats(&mut all, &expected);
    let bits = |m: &Matrix| m.values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&scaled.matrix), bits(&all.features));
}

fn typed(pairs: &[(&str, ColumnKind)]) -> BTreeMap<String, ColumnKind> {
    pairs.iter().map(|(n, k)| (n.to_string(), *k)).collect()
}

const TABLE: &str = "age,sex,when,y\n\
    30,f,2024-01-01,a\n\
    ,m,2024-01-02,b\n\
    50,f,,a\n\
    NA,f,2024-01-08,b\n\
    10,m,2024-01-03,a\n\
    20,m,2024-01-04,b\n";

fn fitted() -> (TextCsv, Vec<Encoding>) {
    use ColumnKind::*;
    let t = csv("t.csv", TABLE);
    let cols = typed(&[("age", Numeric), ("sex", Category), ("when", Date)]);
    let inputs = typed_inputs(&t, &cols, &["y".into()]).unwrap();
    let enc = fit(&t, &inputs, &Missing::default()).unwrap();
    (t, enc)
}

#[test]
fn fits_medians_indicators_and_levels_on_the_training_rows() {
    let (_, enc) = fitted();
    assert_eq!(enc[0].fill, Some(25.0)); // median of 10, 20, 30, 50
    assert!(enc[0].indicator);
    assert_eq!(
        enc[1].levels.as_deref(),
        Some(&["f".to_string(), "m".to_string()][..])
    );
    assert!(!enc[1].indicator);
    // The lower middle of five dates: 2024-01-03.
    assert_eq!(
        enc[2].fill,
        Some(dates::parse("2024-01-03").unwrap() as f64)
    );
    let names: Vec<String> = enc
        .iter()
        .flat_map(|e| e.inputs())
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        [
            "age",
            "age.missing",
            "sex=f",
            "sex=m",
            "sex=(missing)",
            "sex=(other)",
            "when.year",
            "when.month",
            "when.day",
            "when.weekday",
            "when.yearday",
            "when.missing"
        ]
    );
    assert_eq!(
        unscaled_inputs(&enc),
        [
            false, true, true, true, true, true, false, false, false, false, false, true
        ]
    );
}

#[test]
fn encodes_missing_cells_and_unseen_levels_without_error() {
    let (_, enc) = fitted();
    let later = csv("later.csv", "id,when,sex,age\n7,2024-02-29,x,\n8,?,,61.5\n");
    let (m, unseen) = encode(&later, &enc, &Missing::default()).unwrap();
    assert_eq!(m.cols, 12);
    #[rustfmt::skip]
    let want = [
        25.0, 1.0, 0.0, 0.0, 0.0, 1.0, 2024.0, 2.0, 29.0, 3.0, 60.0, 0.0,
        61.5, 0.0, 0.0, 0.0, 1.0, 0.0, 2024.0, 1.0, 3.0, 2.0, 3.0, 1.0,
    ];
    assert_eq!(m.values, want);
    assert_eq!(unseen, Unseen(vec![("sex".into(), 1)]));
    let line = unseen.line(Path::new("later.csv")).unwrap();
    assert!(line.ends_with("(other): 1 in \"sex\""), "{line}");
}

#[test]
fn rare_levels_share_the_other_input() {
    let mut text = String::from("c,y\n");
    for (level, n) in [("a", 5), ("b", 3), ("c", 2), ("d", 1)] {
        for _ in 0..n {
            text += &format!("{level},1\n");
        }
    }
    let t = csv("rare.csv", &text);
    let enc = fit(&t, &[(0, ColumnKind::Category)], &Missing::default()).unwrap();
    assert_eq!(enc[0].levels.as_deref().unwrap(), ["a", "b"]);
    let (m, unseen) = encode(&t, &enc, &Missing::default()).unwrap();
    let other: f32 = (0..m.rows).map(|r| m.row(r)[3]).sum();
    assert_eq!(other, 3.0);
    assert_eq!(unseen.0, [("c".to_string(), 3)]);
}

/// An embedded column is one input, the level's index: its levels (more than one-hot's
/// [`MAX_LEVELS`] here), then "(missing)", then "(other)" for rare and unseen levels.
#[test]
fn an_embedded_category_is_one_index_input() {
    let mut text = String::from("shop,y\n");
    for level in 0..100 {
        text += &format!("s{level:03},1\ns{level:03},0\ns{level:03},1\n");
    }
    text += "rare,1\n,0\n";
    let t = csv("shops.csv", &text);
    let embed: Embed = [("shop".to_string(), 5)].into();
    let enc = fit_embedded(
        &t,
        &[(0, ColumnKind::Category)],
        &Missing::default(),
        &embed,
    );
    let enc = enc.unwrap();
    assert_eq!(enc[0].embed, Some(5));
    assert_eq!(enc[0].levels.as_ref().unwrap().len(), 100);
    assert_eq!(vocabulary(&enc[0]), Some(102));
    assert_eq!(enc[0].inputs(), [("shop=(index)".to_string(), true)]);
    assert!(enc[0].check().is_ok());
    let later = csv("later.csv", "shop\ns042\ns000\nnew\nNA\ns099\n");
    let (m, unseen) = encode(&later, &enc, &Missing::default()).unwrap();
    assert_eq!(m.values, [42.0, 0.0, 101.0, 100.0, 99.0]);
    assert_eq!(unseen.0, [("shop".to_string(), 1)]);
    let zero = Encoding {
        embed: Some(0),
        ..enc[0].clone()
    };
    assert!(zero.check().is_err());
}

#[test]
fn embedding_widths_follow_fastai_within_the_rows() {
    // fastai's 1.6 n^0.56: 22 for 107 rows of vectors, 600 at most.
    assert_eq!(embed_width(107, 1_000_000), Some(22));
    assert_eq!(embed_width(1_000_000, u32::MAX as usize), Some(600));
    // At most one value per two training rows; below 2 wide, no embedding.
    assert_eq!(embed_width(302, 6000), Some(9));
    assert_eq!(embed_width(1930, 15_000), Some(3));
    assert_eq!(embed_width(302, 1000), None);
}

#[test]
fn bad_cells_and_untyped_columns_name_what_is_wrong() {
    use ColumnKind::*;
    let t = csv("bad.csv", "a,d,y\n1,2024-01-01,0\nabc,2024-13-01,1\n");
    let err = fit(&t, &[(0, Numeric)], &Missing::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("bad.csv: line 3: column \"a\" (numeric) holds \"abc\""),
        "{err}"
    );
    let err = fit(&t, &[(1, Date)], &Missing::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("line 3: column \"d\" (date) holds \"2024-13-01\", not a date"),
        "{err}"
    );
    let err = typed_inputs(&t, &typed(&[("a", Numeric)]), &["y".into()])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("column \"d\" has no type in data.columns"),
        "{err}"
    );
    let err = typed_inputs(&t, &typed(&[("y", Numeric)]), &["y".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("gives a type to \"y\", the label"), "{err}");
    let t = csv("empty.csv", "a,y\n,0\nNA,1\n");
    let err = fit(&t, &[(0, Numeric)], &Missing::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"a\" (numeric) has no value in any row"),
        "{err}"
    );
    // A spelling of missing of the user's own.
    let t = csv("own.csv", "a,y\n-999,0\n3,1\n");
    let missing = Missing::new(&["-999".to_string()]);
    let enc = fit(&t, &[(0, Numeric)], &missing).unwrap();
    assert_eq!((enc[0].fill, enc[0].indicator), (Some(3.0), true));
}

#[test]
fn infers_types_with_reasons() {
    // `late` holds a number in its first row only: a sample of that row guesses it numeric.
    let mut text = String::from("id,num,flag,colour,when,note,name,same,empty,late,y\n");
    for i in 0..30 {
        let num = if i % 7 == 0 {
            "NA".to_string()
        } else {
            format!("{}.5", i % 9)
        };
        let flag = ["yes", "No"][i % 2];
        let colour = ["red", "green", "blue"][i % 3];
        let note = format!("a long remark number {i} about things");
        writeln_row(
            &mut text,
            &[
                &(100 + i).to_string(),
                &num,
                flag,
                colour,
                &format!("2024-03-{:02}", i + 1),
                &note,
                &format!("person{i}"),
                "k",
                "",
                if i == 0 { "7" } else { ["lo", "hi"][i % 2] },
                "0",
            ],
        );
    }
    let t = csv("infer.csv", &text);
    let got = inferred(&t, "y");
    let kinds: Vec<(&str, ColumnKind, usize)> = got
        .iter()
        .map(|c| (c.name.as_str(), c.kind, c.missing))
        .collect();
    use ColumnKind::*;
    assert_eq!(
        kinds,
        [
            ("id", Ignore, 0),
            ("num", Numeric, 5),
            ("flag", Category, 0),
            ("colour", Category, 0),
            ("when", Date, 0),
            ("note", Ignore, 0),
            ("name", Ignore, 0),
            ("same", Ignore, 0),
            ("empty", Ignore, 30),
            ("late", Category, 0)
        ]
    );
    let why: Vec<&str> = got.iter().map(|c| c.why.as_str()).collect();
    assert_eq!(why[0], "an ID: a different integer in every row");
    assert_eq!(why[2], "yes/no values");
    assert_eq!(why[5], "free text: many words, nearly all different");
    assert_eq!(why[6], "an ID or a name: different text in every row");
    assert_eq!(why[7], "the same value in every row");
    assert_eq!(got[1].values, "0.5 to 8.5");
    assert_eq!(got[4].values, "2024-03-01 to 2024-03-30");
    let table = super::infer::table(&got);
    assert!(
        table.starts_with("column  type      missing  values"),
        "{table}"
    );
    assert!(
        table.contains("num     numeric         5  0.5 to 8.5"),
        "{table}"
    );
}

/// A text column nearly unique per row is ignored with its reason; one with as many levels
/// but half its rows in levels seen three times stays a category, and so does one whose rows
/// are mostly missing (a level of its own) and otherwise unique.
#[test]
fn a_nearly_unique_text_column_is_ignored_with_its_reason() {
    let mut text = String::from("title,mixed,cabin,y\n");
    for i in 0..30 {
        let mixed = if i < 15 {
            format!("m{}", i / 3)
        } else {
            format!("u{i}")
        };
        let cabin = if i < 12 {
            format!("C{i}")
        } else {
            String::new()
        };
        writeln_row(
            &mut text,
            &[&format!("film {}", i % 20), &mixed, &cabin, "0"],
        );
    }
    let got = inferred(&csv("titles.csv", &text), "y");
    let kinds: Vec<ColumnKind> = got.iter().map(|c| c.kind).collect();
    use ColumnKind::*;
    assert_eq!(kinds, [Ignore, Category, Category]);
    assert_eq!(
        got[0].why,
        "nearly unique: 20 levels in 30 rows, 100 % of them in a level seen under 3 times (titles, names or free text)"
    );
}

/// Integers named like codes, or spelled with a leading zero, with 20 different values or
/// more, are flagged (and stay numeric); a plain count, or a code of few values, is not.
#[test]
fn integer_codes_are_flagged_with_what_to_do() {
    let mut text = String::from("user_id,area,count,shop_code,y\n");
    for i in 0..40 {
        let row = [
            format!("{}", 700 + (i * 7) % 25),
            format!("0{}", 4100 + i % 30),
            format!("{}", i % 30),
            format!("{}", i % 5),
            "0".to_string(),
        ];
        writeln_row(
            &mut text,
            &row.iter().map(String::as_str).collect::<Vec<_>>(),
        );
    }
    let got = inferred(&csv("codes.csv", &text), "y");
    let why: Vec<&str> = got.iter().map(|c| c.why.as_str()).collect();
    let hint = |name: &str, n: usize| {
        format!(
            "integer codes? {n} different values, named or spelled like codes: `ember init --category {name}` makes it a category"
        )
    };
    assert_eq!(
        why,
        [hint("user_id", 25).as_str(), &hint("area", 30), "", ""]
    );
    assert!(got.iter().all(|c| c.kind == ColumnKind::Numeric));
}

/// A file of 8 MiB or more is read in two halves side by side: a guess proved wrong in the
/// second half (a date column with a number, a numeric column with text) is read again as
/// text, as in the first.
#[test]
fn a_guess_proved_wrong_late_in_a_large_file_is_read_again_as_text() {
    let mut text = String::from("n,d,t,y\n");
    let rows = 450_000;
    for r in 0..rows {
        let d = if r == rows - 2 {
            "20240101".to_string()
        } else {
            format!("2024-01-{:02}", 1 + r % 28)
        };
        let t = if r == rows - 1 {
            "late"
        } else {
            ["1", "2", "3"][r % 3]
        };
        writeln_row(
            &mut text,
            &[&format!("{}.5", r % 1000), &d, t, &(r % 2).to_string()],
        );
    }
    assert!(text.len() > 8 << 20);
    let got = inferred(&csv("large.csv", &text), "y");
    let kinds: Vec<ColumnKind> = got.iter().map(|c| c.kind).collect();
    use ColumnKind::*;
    assert_eq!(kinds, [Numeric, Category, Category]);
}

/// A category with more than one-hot's levels is embedded when the rows allow a width of 2 or
/// more, and is one-hot (its commonest levels) with the reason said when they do not.
#[test]
fn many_levels_are_embedded_where_the_rows_allow() {
    let table = |repeats: usize| {
        let mut text = String::from("shop,y\n");
        for r in 0..repeats {
            for level in 0..70 {
                text += &format!("s{level:02},{}\n", (level + r) % 2);
            }
        }
        csv("many.csv", &text)
    };
    // 70 levels of 3 rows: 210 rows, too few for 72 vectors of 2.
    let few = inferred(&table(3), "y");
    assert_eq!((few[0].kind, few[0].embed), (ColumnKind::Category, None));
    let why = "text; 70 levels in 3+ rows: one-hot keeps the 64 commonest (too few rows per level to embed)";
    assert_eq!(few[0].why, why);
    // 10 rows a level: 700 rows, 4 wide (fastai's rule would give 17).
    let enough = inferred(&table(10), "y");
    assert_eq!(enough[0].embed, Some(4));
    let why = "text; 70 levels in 3+ rows, over one-hot's 64: embedded, 4 wide";
    assert_eq!(enough[0].why, why);
}

#[test]
fn a_robust_column_is_centred_divided_and_clipped_smoothly_as_fitted() {
    // 20 values: 1..=19 and one far one; a missing cell takes the median.
    let mut text = String::from("income,y\n");
    for v in (1..=19)
        .map(|v| v.to_string())
        .chain(["1000".into(), "".into()])
    {
        writeln_row(&mut text, &[&v, "0"]);
    }
    let t = csv("robust.csv", &text);
    let scaling = Scalings::from([("income".to_string(), Scaling::Robust)]);
    let inputs = [(0, ColumnKind::Numeric)];
    let enc = fit_with(&t, &inputs, &Missing::default(), &(Embed::new(), scaling)).unwrap();
    // The median of 1..=19 and 1000 is 10.5; its quartiles (the values of ranks 5 and 14
    // from 0, 19 × 1/4 and 19 × 3/4 rounded) 6 and 15.
    let fit = Robust {
        center: 10.5,
        scale: 9.0,
    };
    assert_eq!((enc[0].fill, enc[0].robust), (Some(10.5), Some(fit)));
    let (m, _) = encode(&t, &enc, &Missing::default()).unwrap();
    let robust = |v: f64| scaling::robust(v, fit) as f32;
    assert_eq!(m.values[0], robust(1.0));
    assert_eq!(m.values[2 * 19], robust(1000.0));
    assert_eq!(m.values[2 * 20..], [0.0, 1.0]); // the median, and the missing indicator
    // One spread above the median is 1 / sqrt(1 + 1/9); the far value stays below 3 spreads.
    assert!((robust(19.5) - 0.9487).abs() < 1e-4);
    assert!(robust(1000.0) < 3.0 && robust(1000.0) > 2.99);
    let bad = |robust| {
        Encoding {
            robust,
            ..enc[0].clone()
        }
        .check()
    };
    assert!(
        bad(Some(Robust {
            center: 1.0,
            scale: 0.0
        }))
        .is_err()
    );
    assert!(
        Encoding {
            kind: ColumnKind::Date,
            ..enc[0].clone()
        }
        .check()
        .is_err()
    );
}

#[test]
fn a_piecewise_linear_column_is_one_input_per_quantile_bin_as_fitted() {
    // 0..=32 and a missing cell: 16 bins two wide, from 0 to 32.
    let mut text = String::from("day,y\n");
    for v in (0..=32).map(|v| v.to_string()).chain(["".into()]) {
        writeln_row(&mut text, &[&v, "0"]);
    }
    let t = csv("bins.csv", &text);
    let scaling = Scalings::from([("day".to_string(), Scaling::PiecewiseLinear)]);
    let inputs = [(0, ColumnKind::Numeric)];
    let enc = fit_with(&t, &inputs, &Missing::default(), &(Embed::new(), scaling)).unwrap();
    let edges: Vec<f64> = (0..=16).map(|i| f64::from(2 * i)).collect();
    assert_eq!(enc[0].bins.as_ref(), Some(&edges));
    let names: Vec<String> = enc[0].inputs().into_iter().map(|(n, _)| n).collect();
    assert_eq!((names.len(), names[0].as_str()), (17, "day[0,2]"));
    assert_eq!(names[16], "day.missing");
    let (m, _) = encode(&t, &enc, &Missing::default()).unwrap();
    assert_eq!(m.cols, 17);
    // 5 is all through the first two bins and half through the third; the missing cell is the
    // median, 16, and says it was missing.
    let row = |r: usize| &m.values[17 * r..17 * (r + 1)];
    let mut five = vec![1.0, 1.0, 0.5];
    five.extend([0.0; 14]);
    assert_eq!(row(5), five);
    let mut missing = vec![1.0; 8];
    missing.extend([0.0; 8]);
    missing.push(1.0);
    assert_eq!(row(33), missing);
    // Ties make one edge (ranks 0, 2, ..., 29 are 1; 31 is the last); one value throughout is
    // one bin one wide.
    let mut tied = vec![1.0; 30];
    tied.extend([2.0, 3.0]);
    assert_eq!(scaling::fit_bins(&mut tied), [1.0, 3.0]);
    assert_eq!(scaling::fit_bins(&mut [4.0; 3]), [4.0, 5.0]);
    let with_bins = |bins: Vec<f64>| {
        Encoding {
            bins: Some(bins),
            ..enc[0].clone()
        }
        .check()
    };
    assert!(with_bins(vec![1.0, 1.0]).is_err());
    assert!(with_bins(vec![1.0]).is_err());
    assert!(with_bins(vec![0.0, f64::INFINITY]).is_err());
    assert!(with_bins(vec![0.0, 1.0]).is_ok());
    let robust = Robust {
        center: 0.0,
        scale: 1.0,
    };
    let both = Encoding {
        robust: Some(robust),
        ..enc[0].clone()
    };
    assert!(both.check().is_err());
}

#[test]
fn a_robust_spread_widens_where_the_middle_half_is_one_value() {
    // Mostly 0: the middle 80 % (ranks 1 and 10 of 0 to 11, 11 × 0.1 and 11 × 0.9 rounded).
    let mut values = vec![0.0; 9];
    values.extend([4.0, 8.0, 16.0]);
    assert_eq!(scaling::fit_robust(&mut values, 0.0).scale, 8.0);
    // 0 but for the largest: half the range; one value throughout: 1.
    let mut values = vec![0.0; 11];
    values.push(8.0);
    assert_eq!(scaling::fit_robust(&mut values, 0.0).scale, 4.0);
    assert_eq!(scaling::fit_robust(&mut [3.0; 5], 3.0).scale, 1.0);
}

#[test]
fn heavy_tails_are_told_from_light_ones() {
    use super::infer::heavy_tail;
    // Evenly spread: the furthest value is 1 spread from the median.
    let even: Vec<f64> = (0..1000).map(f64::from).collect();
    assert_eq!(heavy_tail(&even), None);
    // Incomes: most in a band, a few a hundred times larger.
    let mut incomes: Vec<f64> = (0..1000).map(|i| 20_000.0 + 30.0 * f64::from(i)).collect();
    incomes.extend([2e6, 5e6]);
    let reach = heavy_tail(&incomes).expect("a heavy tail");
    // (5,000,000 - 35,015) / (42,530 - 27,500)
    assert!((330.0..331.0).contains(&reach), "{reach}");
}

/// `init`'s types of the columns of `csv`'s file but `label`: the same whether no column is
/// parsed as read (no sample), each column its first rows show to hold numbers or dates is
/// (the whole file as sample), or those of the file's first record are (a column holding
/// a number there and text further on is read again as text).
fn inferred(csv: &TextCsv, label: &str) -> Vec<Inferred> {
    let missing = Missing::default();
    let at = csv.column(label, "label").unwrap();
    let with_sample = |bytes: u64| {
        let training = read_sampling(&csv.path, label, &missing, &[], bytes).unwrap();
        infer(&training, at, &missing)
    };
    let as_text = with_sample(0);
    let first_line = std::fs::read_to_string(&csv.path)
        .unwrap()
        .find('\n')
        .unwrap() as u64;
    assert_eq!(with_sample(first_line + 2), as_text);
    assert_eq!(with_sample(u64::MAX), as_text);
    as_text
}

fn writeln_row(text: &mut String, cells: &[&str]) {
    text.push_str(&cells.join(","));
    text.push('\n');
}

#[test]
fn describes_what_each_type_contributes() {
    let (_, enc) = fitted();
    assert_eq!(
        describe(&enc, 2),
        "inputs: 1 numeric -> 2 (missing cells in 1), 1 category -> 4, 1 date -> 6 (missing cells in 1) = 12 inputs; 2 columns ignored"
    );
}

#[test]
fn a_hand_edited_encoding_must_fit_its_kind() {
    let (_, mut enc) = fitted();
    assert!(enc.iter().all(|e| e.check().is_ok()));
    enc[0].fill = None;
    assert!(
        enc[0]
            .check()
            .unwrap_err()
            .contains("\"age\" (numeric) needs a finite fill")
    );
    enc[1].fill = Some(1.0);
    assert!(enc[1].check().is_err());
}

#[test]
fn a_missing_cell_is_missing_even_where_a_hand_edited_level_is_spelled_so() {
    let t = csv("na-level.csv", "c,y\nNA,0\nb,1\nz,0\n");
    let enc = Encoding {
        column: "c".into(),
        kind: ColumnKind::Category,
        fill: None,
        indicator: false,
        levels: Some(vec!["NA".into(), "b".into()]),
        embed: None,
        robust: None,
        bins: None,
    };
    let (m, unseen) = encode(&t, &[enc], &Missing::default()).unwrap();
    // Inputs: "NA", "b", (missing), (other).
    assert_eq!(m.values, [0., 0., 1., 0., 0., 1., 0., 0., 0., 0., 0., 1.]);
    assert_eq!(unseen, Unseen(vec![("c".to_string(), 1)]));
}

#[test]
fn missing_spellings_match_in_any_letter_case_and_nothing_else() {
    let default = Missing::default();
    for cell in ["", "NA", "na", "nan", "NaN", "NULL", "Null", "?"] {
        assert!(default.is(cell), "{cell:?}");
    }
    for cell in ["0", "N", "nab", "1.5", "?x", "-", "none"] {
        assert!(!default.is(cell), "{cell:?}");
    }
    let custom = Missing::new(&["-999".to_string(), "Unknown".to_string()]);
    assert!(custom.is("-999") && custom.is("UNKNOWN") && custom.is("unknown"));
    assert!(!custom.is("") && !custom.is("-99") && !custom.is("NA"));
}

#[test]
fn the_error_names_the_files_first_bad_cell() {
    use ColumnKind::*;
    let t = csv("two-bad.csv", "a,b,y\n1,2,0\n3,x,1\nz,w,0\n");
    let inputs = [(0, Numeric), (1, Numeric)];
    let missing = Missing::default();
    let good = csv("good.csv", "a,b,y\n1,2,0\n3,4,1\n");
    let enc = fit(&good, &inputs, &missing).unwrap();
    let kinds = typed(&[("a", Numeric), ("b", Numeric)]);
    let parsed = read_typed(&t.path, &kinds, &missing).unwrap();
    // Fitted, and encoded as text and as parsed while read: the same first bad cell.
    let errors = [
        fit(&t, &inputs, &missing).unwrap_err(),
        encode(&t, &enc, &missing).unwrap_err(),
        encode(&parsed, &enc, &missing).unwrap_err(),
    ];
    for err in errors.map(|e| e.to_string()) {
        assert!(
            err.contains("line 3: column \"b\" (numeric) holds \"x\""),
            "{err}"
        );
    }
}

#[test]
fn a_bad_cell_in_a_row_left_out_for_its_missing_label_is_no_error() {
    use ColumnKind::*;
    let text = "a,d,y\n1,2024-01-01,0\nabc,2024-13-01,NA\n3,,1\nx,2024-01-05,\n5,2024-01-03,1\n";
    let t = csv("dropped.csv", text);
    let kinds = typed(&[("a", Numeric), ("d", Date)]);
    let missing = Missing::default();
    let mut parsed = read_typed(&t.path, &kinds, &missing).unwrap();
    assert_eq!(
        parsed.drop_missing_labels(&["y".into()], &missing).unwrap(),
        2
    );
    assert!(parsed.first_unreadable(0).is_none() && parsed.first_unreadable(1).is_none());
    let days = |d: &str| dates::parse(d).unwrap() as f64;
    let values: Vec<f64> = parsed.value_halves(1).concat();
    assert_eq!(values[0], days("2024-01-01"));
    assert!(values[1].is_nan());
    assert_eq!(values[2], days("2024-01-03"));
    let Fitted {
        encodings: enc,
        matrix: m,
        ..
    } = fit_and_encode(
        &parsed,
        &[(0, Numeric), (1, Date)],
        &missing,
        &Embed::default(),
        &Scalings::new(),
        Layout::default(),
    )
    .unwrap();
    assert_eq!((enc[0].fill, enc[0].indicator), (Some(3.0), false));
    assert_eq!(m.rows, 3);
}

#[test]
fn a_table_of_many_blocks_counts_each_unseen_cell_once() {
    // 66 inputs a row (64 levels, missing, other): blocks of 1,985 rows, so 3 blocks here.
    let rows = 5000;
    let mut text = String::from("c,y\n");
    for r in 0..rows {
        writeln_row(&mut text, &[&format!("l{}", r * 3 % 70), "0"]);
    }
    let t = csv("blocks.csv", &text);
    assert!(rows > 2 * encode_rows(66));
    let Fitted {
        encodings: enc,
        matrix: m,
        unseen,
        ..
    } = fit_and_encode(
        &t,
        &[(0, ColumnKind::Category)],
        &Missing::default(),
        &Embed::default(),
        &Scalings::new(),
        Layout::default(),
    )
    .unwrap();
    let levels = enc[0].levels.as_ref().unwrap();
    assert_eq!((levels.len(), m.cols), (MAX_LEVELS, MAX_LEVELS + 2));
    let others = (0..rows)
        .filter(|r| !levels.contains(&format!("l{}", r * 3 % 70)))
        .count();
    assert_eq!(unseen, Unseen(vec![("c".to_string(), others)]));
    // Each row holds one 1, in the other slot exactly for those cells.
    let other_slot = (0..rows)
        .filter(|&r| m.row(r)[MAX_LEVELS + 1] == 1.0)
        .count();
    assert_eq!(other_slot, others);
    assert!((0..rows).all(|r| m.row(r).iter().sum::<f32>() == 1.0));
}
