//! The guide stays true to the code:
//! - `docs/config.md` names every key of the job file's and the sweep file's schemas, and no
//!   other (serde's own error on an unknown key lists a table's keys);
//! - `docs/commands.md` is ember's own `--help` for every command, as this binary prints it
//!   (`make docs` rewrites it);
//! - every `ember ...` command written in README.md and docs/ names a real command, and every
//!   `--flag` it uses is one that command takes;
//! - every relative link and every repository path they name exists, and README.md links every
//!   guide page;
//! - `docs/ARCHITECTURE.md`'s layers hold in the code (`layers`).

mod common;
#[path = "docs/layers.rs"]
mod layers;

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Rewrites docs/commands.md instead of comparing it (`make docs`).
const BLESS: &str = "EMBER_BLESS_DOCS";

// ---------------------------------------------------------------- the config reference

/// Which file a table of the reference belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum File {
    Job,
    Sweep,
}

/// The tables whose keys serde checks, as the reference heads them (`""` for the top level).
const PROBED: [(File, &str); 12] = [
    (File::Job, ""),
    (File::Job, "[data]"),
    (File::Job, "[[data.encoding]]"),
    (File::Job, "[model]"),
    (File::Job, "[[model.conv]]"),
    (File::Job, "[model.augment]"),
    (File::Job, "[sgd]"),
    (File::Job, "[adam]"),
    (File::Job, "[adamw]"),
    (File::Job, "[schedule]"),
    (File::Job, "[early_stopping]"),
    (File::Sweep, ""),
];

/// The keys `table` accepts, from the one-line error ember gives for an unknown key there
/// (serde lists the expected fields).
fn schema_keys(file: File, table: &str, dir: &Path) -> BTreeSet<String> {
    let header = match table {
        "" => String::new(),
        t => format!("{t}\n"),
    };
    let name = format!("probe-{file:?}-{}.toml", table.trim_matches(['[', ']']));
    let path = config(dir, &name, &format!("{header}not_a_key_of_ember = 1\n"));
    let out = match file {
        File::Job => ember(&["train", path_str(&path), "--device", "cpu"]),
        File::Sweep => ember(&["sweep", "plan", path_str(&path)]),
    };
    let err = stderr(&out);
    // serde writes "expected one of `a`, `b`, `c`", or for two keys "expected `a` or `b`".
    let list = err
        .split("expected ")
        .nth(1)
        .unwrap_or_else(|| panic!("{file:?} {table}: no list of keys in {err}"));
    let list = list.lines().next().unwrap();
    list.strip_prefix("one of ")
        .unwrap_or(list)
        .split(", ")
        .flat_map(|k| k.split(" or "))
        .map(|k| k.trim().trim_matches('`').to_string())
        .collect()
}

/// docs/config.md's keys: per (file, table), the first cell of each table row. A `## ... job
/// file` or `## ... sweep file` heading picks the file, a `###` heading the tables (`Top level`,
/// or the tables in backticks).
fn documented_keys(page: &str) -> BTreeMap<(File, String), BTreeSet<String>> {
    let mut keys: BTreeMap<(File, String), BTreeSet<String>> = BTreeMap::new();
    let (mut file, mut tables) = (None, Vec::<String>::new());
    for line in page.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            file = match (h.contains("job file"), h.contains("sweep file")) {
                (true, _) => Some(File::Job),
                (_, true) => Some(File::Sweep),
                _ => None,
            };
            tables.clear();
        } else if let Some(h) = line.strip_prefix("### ") {
            tables = match h.trim() {
                "Top level" => vec![String::new()],
                h => h
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_string)
                    .collect(),
            };
            // A table is documented by its heading, with key rows or in prose.
            if let Some(f) = file {
                for t in &tables {
                    keys.entry((f, t.clone())).or_default();
                }
            }
        } else if let (Some(f), Some(key)) = (file, row_key(line)) {
            for t in &tables {
                let fresh = keys.entry((f, t.clone())).or_default().insert(key.clone());
                assert!(fresh, "docs/config.md lists `{key}` twice in {f:?} {t}");
            }
        }
    }
    keys
}

/// `key` of a table row that starts `` | `key` | ``.
fn row_key(line: &str) -> Option<String> {
    let cell = line.strip_prefix("| `")?;
    let (key, rest) = cell.split_once('`')?;
    rest.trim_start().starts_with('|').then(|| key.to_string())
}

#[test]
fn the_config_reference_names_every_key_of_the_schema_and_no_other() {
    let dir = scratch("docs-config");
    let page = std::fs::read_to_string(root().join("docs/config.md")).unwrap();
    let documented = documented_keys(&page);
    let mut problems = Vec::new();
    for (file, table) in PROBED {
        let schema = schema_keys(file, table, &dir);
        let empty = BTreeSet::new();
        let docs = documented.get(&(file, table.to_string())).unwrap_or(&empty);
        let at = format!("{file:?} file, table {table:?}");
        // A key that is a table of its own (`data`, `data.columns`) is documented by its section.
        let section = |key: &str| {
            let path = match table.trim_matches(['[', ']']) {
                "" => key.to_string(),
                t => format!("{t}.{key}"),
            };
            [format!("[{path}]"), format!("[[{path}]]")]
                .iter()
                .any(|t| documented.contains_key(&(file, t.clone())))
        };
        for missing in schema.difference(docs).filter(|k| !section(k)) {
            problems.push(format!(
                "{at}: `{missing}` is in the schema but not in docs/config.md"
            ));
        }
        for extra in docs.difference(&schema) {
            problems.push(format!(
                "{at}: docs/config.md names `{extra}`, not in the schema"
            ));
        }
    }
    // `[random]` takes any key besides these two (one per swept axis), so serde cannot list it.
    let random = documented.get(&(File::Sweep, "[random]".to_string()));
    let expected: BTreeSet<String> = ["trials", "seed"].map(String::from).into();
    if random != Some(&expected) {
        problems.push(format!(
            "sweep file [random]: rows {random:?}, not trials and seed"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------- the command reference

/// `ember ARGS --help`, as a user sees it without a tracking server configured.
fn help(args: &[&str]) -> String {
    let out = Command::new(bin())
        .args(args)
        .arg("--help")
        .env_remove("MLFLOW_TRACKING_URI")
        .env_remove("MLFLOW_EXPERIMENT_NAME")
        .output()
        .expect("ember runs");
    ok(&out);
    stdout(&out)
}

/// The subcommands a help text lists under `Commands:` (`help` aside).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Every command path (`[]`, `["train"]`, `["sweep", "run"]`, ...) with its help text.
fn every_help() -> Vec<(Vec<String>, String)> {
    let mut found = Vec::new();
    let mut queue = vec![Vec::<String>::new()];
    while let Some(path) = queue.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        for sub in subcommands(&text).into_iter().rev() {
            let mut child = path.clone();
            child.push(sub);
            queue.push(child);
        }
        found.push((path, text));
    }
    found
}

/// docs/commands.md as this binary's help makes it.
fn command_reference(helps: &[(Vec<String>, String)]) -> String {
    let mut page = String::from(
        "# Command reference\n\n\
         Every command's `--help`, as ember prints it. Generated: `make docs` rewrites this \
         page,\nand `tests/docs.rs` fails when it differs from the binary's help.\n",
    );
    for (path, text) in helps {
        let name = std::iter::once("ember")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        page.push_str(&format!(
            "\n## {name}\n\n```text\n{}\n```\n",
            text.trim_end()
        ));
    }
    page
}

#[test]
fn the_command_reference_is_the_binarys_help() {
    let helps = every_help();
    assert!(helps.len() > 10, "{helps:?}");
    let expected = command_reference(&helps);
    let path = root().join("docs/commands.md");
    if std::env::var_os(BLESS).is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    if written != expected {
        let first = written
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(written.lines().count().min(expected.lines().count()));
        panic!(
            "docs/commands.md is not the binary's --help (first difference at line {}: {:?}); \
             `make docs` rewrites it",
            first + 1,
            expected.lines().nth(first)
        );
    }
}

// ---------------------------------------------------------------- commands and paths in prose

/// README.md and every page of docs/ but the generated command reference.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        let generated = path.ends_with("commands.md");
        if path.extension().is_some_and(|e| e == "md") && !generated {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

/// The code a page shows: the lines of its fenced blocks, and its inline code spans.
fn code_of(page: &str) -> Vec<String> {
    let mut code = Vec::new();
    let mut fenced = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if fenced {
            code.push(line.to_string());
        } else {
            code.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    code
}

/// An `ember` command in `code` (after a `$ ` prompt or at the start): its words.
fn ember_command(code: &str) -> Option<Vec<String>> {
    let code = code.trim();
    let code = code.strip_prefix("$ ").unwrap_or(code);
    let rest = code.strip_prefix("ember ")?;
    // A comment after the command is not part of it; a pipe ends it.
    let rest = rest.split(" #").next()?.split(" |").next()?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

#[test]
fn every_ember_command_in_the_guide_is_real() {
    let helps: BTreeMap<Vec<String>, String> = every_help().into_iter().collect();
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        for words in code_of(&text).iter().filter_map(|c| ember_command(c)) {
            // The longest command path the words start with.
            let mut path: Vec<String> = Vec::new();
            for w in &words {
                let mut next = path.clone();
                next.push(w.clone());
                if !helps.contains_key(&next) {
                    break;
                }
                path = next;
            }
            if path.is_empty() {
                problems.push(format!(
                    "{name}: `ember {}`: no such command",
                    words.join(" ")
                ));
                continue;
            }
            checked += 1;
            let help = &helps[&path];
            for flag in words.iter().filter(|w| w.starts_with("--")) {
                let flag = flag.split(['=', '[', ']']).next().unwrap();
                let taken = help.split(|c: char| !(c.is_alphanumeric() || c == '-'));
                if !taken.clone().any(|w| w == flag) {
                    problems.push(format!(
                        "{name}: `ember {}`: {flag} is not a flag of `ember {}`",
                        words.join(" "),
                        path.join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} ember commands found in the guide"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A repository path a page names in its code (`configs/fashion-mlp.toml`), without the
/// punctuation around it; none for a pattern or a placeholder.
fn repo_path(word: &str) -> Option<&str> {
    const TOP: [&str; 10] = [
        "configs/",
        "examples/",
        "scripts/",
        "docs/",
        "bench/",
        "datasets/",
        "tests/",
        "src/",
        "benches/",
        "crates/",
    ];
    let word = word.trim_matches(|c: char| "()[],.:;'\"".contains(c));
    let placeholder = word.contains(['*', '{', '<', '$']) || word.contains("...");
    (TOP.iter().any(|t| word.starts_with(t)) && !placeholder).then_some(word)
}

#[test]
fn every_link_and_path_in_the_guide_exists() {
    let mut problems = Vec::new();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let here = page.parent().unwrap();
        for link in text.split("](").skip(1).filter_map(|s| s.split(')').next()) {
            let target = link.split('#').next().unwrap();
            if target.is_empty() || target.contains("://") {
                continue;
            }
            if !here.join(target).exists() {
                problems.push(format!("{name}: the link ({link}) leads nowhere"));
            }
        }
        for code in code_of(&text) {
            for path in code.split_whitespace().filter_map(repo_path) {
                if !root().join(path).exists() {
                    problems.push(format!("{name}: `{path}` does not exist"));
                }
            }
        }
        let linked = format!("]({})", name);
        if name.starts_with("docs/") && !readme.contains(&linked) {
            problems.push(format!("README.md does not link {name}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------- the layers

fn architecture_page() -> String {
    std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap()
}

#[test]
fn every_import_points_down_the_architecture_pages_layers() {
    let line_of = layers::layers(&architecture_page());
    let found = layers::violations(&root().join("src"), &line_of);
    assert!(
        found.is_empty(),
        "imports against docs/ARCHITECTURE.md's layers:\n{}",
        found.join("\n")
    );
}

/// The check itself: on a small tree of its own, an import up (through `super::`, after a
/// test module's declaration), one sideways, a module left off the list and a name on it with
/// no module are each found; a name nested in a `use` group, a test module's imports (inline,
/// or in a file of its own), a comment, a longer name ending in `crate::` and the root's
/// `input_err!` macro (the `error` module's) are not.
#[test]
fn the_layer_check_finds_upward_and_sideways_imports() {
    let dir = std::env::temp_dir().join(format!("ember-layers-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("top.rs", "use crate::low::f;\n");
    write(
        "mid/mod.rs",
        "use crate::{low::{g, top}, error};\n// crate::also_mid in a comment\n#[cfg(test)]\nmod checks;\nfn after() { super::top::x() }\n",
    );
    write("mid/checks.rs", "use crate::top;\n");
    write("mid/side.rs", "fn f() { crate::also_mid::h() }\n");
    write("mid/deep.rs", "fn f() { super::super::top::y() }\n");
    write(
        "also_mid.rs",
        "#[cfg(test)]\n#[allow(unused)]\nmod tests {\n    use crate::top;\n}\nfn g() { crate::low::f() }\n",
    );
    write(
        "low.rs",
        "pub fn f() { crate::input_err!(\"x\"); my_crate::top(); }\n",
    );
    write("stray.rs", "");
    write("error.rs", "");
    let page = "# x\n\n## Layers\n\n1. `top` — a\n2. `mid` `also_mid` — b\n3. `low` `gone` — c\n4. `error` — d\n";
    let found = layers::violations(&dir, &layers::layers(page));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        found,
        [
            "`gone` is on the layers but not in src/",
            "`stray` is on no line of the layers",
            "src/mid/deep.rs: mid (line 2) uses top (line 1)",
            "src/mid/mod.rs: mid (line 2) uses top (line 1)",
            "src/mid/side.rs: mid (line 2) uses also_mid (line 2)",
        ],
    );
}
