//! The fabric's top-level modules form layers: no module reaches, through
//! `crate::` paths (the crate root's re-exports counted as the modules they
//! come from), back to itself. Read from the sources, so a new import that
//! closes a circle fails here, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module name -> the source of every file in it.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let relative = path.strip_prefix(src).expect("below src");
            let top = relative.components().next().expect("a name");
            let top = top.as_os_str().to_string_lossy();
            let name = top.trim_end_matches(".rs").to_string();
            if path.extension().is_some_and(|e| e == "rs") && name != "lib" {
                let text = std::fs::read_to_string(&path).expect("a source file");
                found
                    .entry(name)
                    .or_insert_with(String::new)
                    .push_str(&text);
            }
        }
    }
    found
}

/// The source without `//` comments (doc links are not imports).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn words(list: &str) -> impl Iterator<Item = &str> {
    list.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// The crate root's re-exports: item name -> the module it comes from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut from = BTreeMap::new();
    for line in code(lib).split(';') {
        let Some(path) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = path.split_once("::") else {
            continue;
        };
        for item in words(items) {
            from.insert(item.to_string(), module.to_string());
        }
    }
    from
}

/// The modules `text` names through `crate::`.
fn uses(
    text: &str,
    modules: &BTreeSet<String>,
    root: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let text = code(text);
    let mut named = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        if text[..at].ends_with('$') {
            continue;
        }
        let rest = &text[at + "crate::".len()..];
        let names: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => words(&group[..group.find('}').unwrap_or(group.len())]).collect(),
            None => words(rest).take(1).collect(),
        };
        for name in names {
            if modules.contains(name) {
                named.insert(name.to_string());
            } else if let Some(module) = root.get(name) {
                named.insert(module.clone());
            }
        }
    }
    named
}

/// A path of modules from `from` back to itself, if there is one.
fn circle(from: &str, edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().expect("never empty");
        for next in edges.get(last).into_iter().flatten() {
            if next == from {
                let mut found = path.clone();
                found.push(next.clone());
                return Some(found);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

#[test]
fn no_module_imports_itself_round_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources = modules(&src);
    let names: BTreeSet<String> = sources.keys().cloned().collect();
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let root = reexports(&lib);
    assert!(root.contains_key("Rank"), "the root's re-exports were read");
    let edges: BTreeMap<String, BTreeSet<String>> = sources
        .iter()
        .map(|(name, text)| {
            let mut named = uses(text, &names, &root);
            named.remove(name);
            (name.clone(), named)
        })
        .collect();
    assert!(edges["shm"].contains("job"), "imports were read: {edges:?}");
    let circles: Vec<String> = names
        .iter()
        .filter_map(|name| circle(name, &edges))
        .map(|path| path.join(" -> "))
        .collect();
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}
