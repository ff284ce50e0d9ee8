//! `--set KEY=VALUE`: overrides of a job file's fields (`adam.lr=3e-4`, `model.hidden=[256,256]`,
//! `data.label=y`). Each value is read as a TOML value (a bare word that is not one is a
//! string), put into the file's table at its dotted key, and checked like the file: an unknown
//! key or a wrong type is an error naming the override. The resolved config records them.

use super::RawConfig;
use crate::error::Result;
use crate::input_err;
use toml::{Table, Value};

/// A value as TOML reads it, or the text itself as a string.
fn value_of(text: &str) -> Value {
    toml::from_str::<Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(text.to_string()))
}

/// The names along a dotted `key`, read as TOML reads one, so that a name may hold spaces or
/// dots in quotes (`data.columns."Body Mass (g)"`); a key without quotes that TOML would not
/// read (`data.columns.Body Mass (g)`) is split at its dots, as ember always has.
fn key_parts(key: &str) -> std::result::Result<Vec<String>, String> {
    let not_a_key = || {
        format!(
            "\"{key}\" is not a key (sections and names joined by dots; a name with dots in quotes)"
        )
    };
    let Ok(mut at) = toml::from_str::<Table>(&format!("{key} = 0")) else {
        let parts: Vec<String> = key.split('.').map(|p| p.trim().to_string()).collect();
        let plain = !key.contains(['"', '\'']) && parts.iter().all(|p| !p.is_empty());
        return plain.then_some(parts).ok_or_else(not_a_key);
    };
    let mut parts = Vec::new();
    while let Some((name, inner)) = at.into_iter().next() {
        parts.push(name);
        match inner {
            Value::Table(t) => at = t,
            _ => return Ok(parts),
        }
    }
    Err(not_a_key())
}

/// `override` split at its first `=` outside quotes: the key and the value.
fn key_and_value(o: &str) -> Option<(&str, &str)> {
    let mut quoted = None;
    for (i, c) in o.char_indices() {
        match (quoted, c) {
            (None, '"' | '\'') => quoted = Some(c),
            (Some(q), c) if c == q => quoted = None,
            (None, '=') => return Some((&o[..i], &o[i + 1..])),
            _ => {}
        }
    }
    None
}

/// Puts `value` at the dotted `key` of `table`, making sections on the way.
fn put(table: &mut Table, key: &str, value: Value) -> std::result::Result<(), String> {
    let parts = key_parts(key)?;
    let (last, sections) = parts.split_last().expect("a key has a name");
    let mut at = table;
    for (i, name) in sections.iter().enumerate() {
        let entry = at
            .entry(name.to_string())
            .or_insert_with(|| Value::Table(Table::new()));
        at = entry
            .as_table_mut()
            .ok_or_else(|| format!("{} is a value, not a section", parts[..=i].join(".")))?;
    }
    at.insert(last.to_string(), value);
    Ok(())
}

/// `raw`'s file `text` with `overrides` applied, each checked against the schema as it comes.
pub fn apply(text: &str, overrides: &[String]) -> Result<RawConfig> {
    let mut table: Table = toml::from_str(text).map_err(|e| input_err!("{}", e.message()))?;
    for o in overrides {
        let Some((key, value)) = key_and_value(o) else {
            return Err(input_err!(
                "--set {o}: expected KEY=VALUE, for example --set adam.lr=3e-4"
            ));
        };
        put(&mut table, key.trim(), value_of(value.trim()))
            .map_err(|why| input_err!("--set {o}: {why}"))?;
        Value::Table(table.clone())
            .try_into::<RawConfig>()
            .map_err(|e| input_err!("--set {o}: {}", e.message().trim().replace('\n', " ")))?;
    }
    let mut raw: RawConfig = Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| input_err!("{}", e.message()))?;
    raw.overrides.extend(overrides.iter().cloned());
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "job = \"tabular-mlp\"\n[adam]\nlr = 0.001\n";

    #[test]
    fn values_land_at_their_keys_typed_as_toml() {
        let sets: Vec<String> = [
            "adam.lr=3e-4",
            "epochs=7",
            "model.hidden=[16, 8]",
            "data.label=target",
            "shuffle=true",
        ]
        .map(String::from)
        .to_vec();
        let raw = apply(FILE, &sets).unwrap();
        assert_eq!(raw.adam.as_ref().unwrap().lr, 3e-4);
        assert_eq!(raw.epochs, Some(7));
        assert_eq!(raw.model.hidden, Some(vec![16, 8]));
        assert_eq!(raw.data.label.as_deref(), Some("target"));
        assert_eq!(raw.shuffle, Some(true));
        // A name in quotes may hold dots and `=`; one without quotes is split at its dots.
        let columns = |o: &str| {
            let raw = apply(FILE, &[o.to_string()]).unwrap();
            raw.data.columns.unwrap().into_keys().collect::<Vec<_>>()
        };
        assert_eq!(columns("data.columns.\"Mass (g)\"=numeric"), ["Mass (g)"]);
        assert_eq!(columns("data.columns.'a=b.c'=numeric"), ["a=b.c"]);
        assert_eq!(columns("data.columns.Mass (g)=numeric"), ["Mass (g)"]);
        assert_eq!(raw.overrides, sets);
        let c = raw.check().unwrap();
        assert_eq!(
            c,
            crate::config::parse(std::path::Path::new("r.toml"), &c.to_toml())
                .unwrap()
                .check()
                .unwrap()
        );
    }

    #[test]
    fn unknown_keys_wrong_types_and_bad_forms_name_the_override() {
        let err = |o: &str| apply(FILE, &[o.to_string()]).unwrap_err().to_string();
        assert!(
            err("adam.lrr=1").starts_with("--set adam.lrr=1: unknown field `lrr`"),
            "{}",
            err("adam.lrr=1")
        );
        assert!(
            err("epochs=ten").starts_with("--set epochs=ten: invalid type: string \"ten\""),
            "{}",
            err("epochs=ten")
        );
        assert!(err("epochs").contains("expected KEY=VALUE"));
        assert!(err("adam..lr=1").contains("is not a key"));
        assert!(err("adam.lr.x=1").contains("adam.lr is a value, not a section"));
    }
}
