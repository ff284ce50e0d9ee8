//! The images source end to end: FashionMNIST's test images written as PNG class folders decode
//! to the IDX pixels bit for bit and train exactly as the IDX path does; RGB, JPEG and mixed
//! sizes; `predict` on a folder; and the bad inputs of an image collection.

mod common;

use common::{bad_input, config, ember, ok, path_str, scratch, stdout};
use ember::config::{Channels, InputScale};
use ember::data::fashion::locate;
use ember::data::idx::{encode, read_images, read_labels};
use ember::data::images::{Decode, decode_all};
use std::path::{Path, PathBuf};

fn train(cfg: &Path, out: &Path) {
    ok(&common::train_on_cpu(cfg, out, &[]));
}

/// The valid (loss, accuracy) rows of a run.
fn valid_rows(run: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split(',').map(String::from).collect::<Vec<_>>())
        .filter(|f| f[1] == "valid")
        .map(|f| (f[2].clone(), f[3].clone()))
        .collect()
}

#[test]
fn fashion_test_images_as_png_folders_decode_and_train_as_the_idx_files() {
    let fashion = locate(None).expect("FashionMNIST (make data, or dataset-fashion-mnist)");
    let images = read_images(&fashion.join("t10k-images-idx3-ubyte.gz")).unwrap();
    let labels = read_labels(&fashion.join("t10k-labels-idx1-ubyte.gz"), 10).unwrap();
    let dir = scratch("images-fashion");
    // Class-major order, as ember lists class folders; by index within a class.
    let mut order: Vec<usize> = (0..images.count).collect();
    order.sort_by_key(|&i| labels[i]);
    let folder = dir.join("png");
    let mut paths = Vec::new();
    for &i in &order {
        let class_dir = folder.join(labels[i].to_string());
        std::fs::create_dir_all(&class_dir).unwrap();
        let path = class_dir.join(format!("{i:05}.png"));
        let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut png = png::Encoder::new(file, 28, 28);
        png.set_color(png::ColorType::Grayscale);
        png.write_header()
            .unwrap()
            .write_image_data(&images.pixels[i * 784..(i + 1) * 784])
            .unwrap();
        paths.push(path);
    }
    let raw = Decode {
        size: [28, 28],
        channels: Channels::Grayscale,
        scale: InputScale::Raw,
    };
    let decoded = decode_all(paths, raw, &indicatif::ProgressBar::hidden()).unwrap();
    let want: Vec<f32> = order
        .iter()
        .flat_map(|&i| {
            images.pixels[i * 784..(i + 1) * 784]
                .iter()
                .map(|&p| f32::from(p))
        })
        .collect();
    assert!(
        decoded.values == want,
        "the PNG pixels differ from the IDX pixels"
    );

    // The same images, in the order ember reads the folder (a seeded shuffle of the files), as
    // IDX files.
    let (items, _) = ember::data::images::list(&folder, None).unwrap();
    let order: Vec<usize> = ember::data::images::ordered(items, 3)
        .iter()
        .map(|item| {
            item.path
                .file_stem()
                .unwrap()
                .to_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    let idx = dir.join("idx");
    std::fs::create_dir_all(&idx).unwrap();
    let pixels: Vec<u8> = order
        .iter()
        .flat_map(|&i| images.pixels[i * 784..(i + 1) * 784].to_vec())
        .collect();
    let ordered_labels: Vec<u8> = order.iter().map(|&i| labels[i]).collect();
    for stem in ["train", "t10k"] {
        let name = |kind: &str| idx.join(format!("{stem}-{kind}"));
        std::fs::write(
            name("images-idx3-ubyte"),
            encode(&[order.len(), 28, 28], &pixels),
        )
        .unwrap();
        std::fs::write(
            name("labels-idx1-ubyte"),
            encode(&[order.len()], &ordered_labels),
        )
        .unwrap();
    }
    let job = |source: &str| {
        format!(
            "task = \"classification\"\nseed = 3\nepochs = 2\nbatch_size = 64\nshuffle = true\n\
             [data]\n{source}\nvalid_fraction = 0.2\n[model]\nhidden = [64]\n[sgd]\nlr = 0.1\n"
        )
    };
    let (from_idx, from_png) = (dir.join("run-idx"), dir.join("run-png"));
    let idx_job = job(&format!("dir = \"{}\"", idx.display()));
    let png_job = job(&format!(
        "source = \"images\"\ndir = \"{}\"",
        folder.display()
    ));
    train(&config(&dir, "idx.toml", &idx_job), &from_idx);
    train(&config(&dir, "png.toml", &png_job), &from_png);
    let (a, b) = (valid_rows(&from_idx), valid_rows(&from_png));
    let accuracy = |rows: &[(String, String)]| rows.last().unwrap().1.parse::<f64>().unwrap();
    assert!(
        (accuracy(&a) - accuracy(&b)).abs() <= 0.005,
        "{a:?} vs {b:?}"
    );
    assert!(accuracy(&b) > 0.7, "{b:?}");
    assert_eq!(a, b, "the same pixels in the same order train identically");
    let resolved = std::fs::read_to_string(from_png.join("config.toml")).unwrap();
    assert!(resolved.contains("image_size = [28, 28]"), "{resolved}");
    assert!(resolved.contains("channels = \"grayscale\""), "{resolved}");
}

/// Writes a `w` x `h` image of one colour (with a little noise) as PNG or JPEG.
fn paint(path: &Path, w: u32, h: u32, rgb: [u8; 3], seed: u32) {
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        let n = ((x * 31 + y * 17 + seed * 7) % 40) as u8;
        image::Rgb([
            rgb[0].saturating_sub(n),
            rgb[1].saturating_sub(n),
            rgb[2].saturating_sub(n),
        ])
    });
    img.save(path).unwrap();
}

/// Class folders "blue" and "red" of mixed sizes and formats.
fn colours(dir: &Path, per_class: u32) -> PathBuf {
    for (class, rgb) in [("red", [220, 30, 30]), ("blue", [30, 30, 220])] {
        let folder = dir.join(class);
        std::fs::create_dir_all(&folder).unwrap();
        for i in 0..per_class {
            let ext = if i % 2 == 0 { "png" } else { "jpg" };
            let (w, h) = if i % 3 == 0 { (12, 9) } else { (8, 8) };
            paint(&folder.join(format!("{i:03}.{ext}")), w, h, rgb, i);
        }
    }
    dir.to_path_buf()
}

#[test]
fn rgb_jpeg_and_png_of_mixed_sizes_train_and_predict_by_file() {
    let dir = scratch("images-colours");
    let train_dir = colours(&dir.join("train"), 30);
    let test_dir = colours(&dir.join("test"), 6);
    let cfg = config(
        &dir,
        "colours.toml",
        &format!(
            "task = \"binary\"\nepochs = 10\nbatch_size = 8\n[data]\nsource = \"images\"\n\
             dir = \"{}\"\ntest_dir = \"{}\"\nimage_size = [6, 6]\nchannels = \"rgb\"\n\
             valid_fraction = 0.25\n[model]\nhidden = [8]\n[adam]\nlr = 0.01\n",
            train_dir.display(),
            test_dir.display()
        ),
    );
    let run = dir.join("run");
    train(&cfg, &run);
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(
        resolved.contains("inputs = 108"),
        "6 x 6 x 3 inputs: {resolved}"
    );
    assert!(
        resolved.contains("classes = [\"blue\", \"red\"]"),
        "{resolved}"
    );
    let eval = ember(&["eval", path_str(&run), "--split", "test", "--device", "cpu"]);
    ok(&eval);
    assert!(
        stdout(&eval).contains("accuracy 100.00 %"),
        "{}",
        stdout(&eval)
    );
    let out = ember(&[
        "predict",
        path_str(&run),
        "--input",
        path_str(&test_dir),
        "--device",
        "cpu",
    ]);
    ok(&out);
    let text = stdout(&out);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("file,probability,label"));
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let want = if f[0].contains("/red/") {
            "red"
        } else {
            "blue"
        };
        assert_eq!(f[2], want, "{line}");
    }
}

#[test]
fn bad_image_collections_get_one_line_naming_the_folder_or_file() {
    let dir = scratch("images-bad");
    let job = |name: &str, data: &Path, extra: &str| {
        config(
            &dir,
            name,
            &format!(
                "task = \"classification\"\n[data]\nsource = \"images\"\ndir = \"{}\"\n{extra}\
                 [model]\nhidden = [4]\n[sgd]\nlr = 0.1\n",
                data.display()
            ),
        )
    };
    let out = dir.join("run");
    let empty = colours(&dir.join("empty"), 2);
    std::fs::create_dir_all(empty.join("green")).unwrap();
    bad_input(
        &ember(&[
            "train",
            path_str(&job("e.toml", &empty, "")),
            "--out",
            path_str(&out),
        ]),
        "empty/green: no PNG or JPEG images in this class folder",
    );
    let corrupt = colours(&dir.join("corrupt"), 2);
    std::fs::write(corrupt.join("red").join("bad.png"), b"not a png at all").unwrap();
    bad_input(
        &ember(&[
            "train",
            path_str(&job("c.toml", &corrupt, "")),
            "--out",
            path_str(&out),
        ]),
        "red/bad.png: not a readable PNG or JPEG image",
    );
    let good = colours(&dir.join("good"), 2);
    let odd = colours(&dir.join("odd"), 1);
    std::fs::rename(odd.join("blue"), odd.join("green")).unwrap();
    let extra = format!("test_dir = \"{}\"\n", odd.display());
    bad_input(
        &ember(&[
            "train",
            path_str(&job("t.toml", &good, &extra)),
            "--out",
            path_str(&out),
        ]),
        "odd/green: class \"green\" is not one of the training classes (blue, red)",
    );
    assert!(!out.exists());
}

#[test]
fn init_drafts_an_images_job_that_trains() {
    let dir = scratch("images-init");
    let data = colours(&dir.join("data"), 20);
    let out = ember(&["init", "--images", path_str(&data)]);
    ok(&out);
    let why = common::stderr(&out);
    assert!(
        why.starts_with("inferred task = \"binary\": two class folders (blue, red); \"red\" is the positive class, 40 images; image_size [9, 12] and rgb"),
        "{why}"
    );
    let cfg = config(&dir, "drafted.toml", &stdout(&out));
    let run = dir.join("run");
    train(&cfg, &run);
    let (_, acc) = valid_rows(&run).pop().unwrap();
    assert_eq!(acc.parse::<f64>().unwrap(), 1.0);
}
