//! The README and `docs/` name only flags and environment variables that
//! exist: every `--flag` and `VMAAS_*` they mention is in the `--help` of
//! one of the real binaries (every subcommand's, read recursively), or, for
//! a variable, is read by one of the project's scripts. A flag on a line
//! that runs another tool (`cargo`, `curl`, …), or goes on such a line
//! after a `\`, belongs to that tool.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The binaries whose `--help` the documents may name.
const BINARIES: [&str; 5] = ["vmaas-server", "vmaas", "vmaas-bench", "function-vmaas", "terraform-provider-vmaas"];

/// Other tools whose command lines the documents show, with their own flags.
const OTHER_TOOLS: [&str; 8] = ["cargo ", "curl ", "terraform ", "git ", "tofu ", "kubectl ", "crossplane ", "helm "];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// The `--help` of `bin args…` and of every subcommand under it.
fn help_tree(bin: &Path, args: &mut Vec<String>, out: &mut String) {
    let Ok(o) = std::process::Command::new(bin).args(args.iter()).arg("--help").output() else { return };
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let subcommands: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect();
    out.push_str(&text);
    for c in subcommands {
        args.push(c);
        help_tree(bin, args, out);
        args.pop();
    }
}

/// Words of `text` that start with `prefix` and go on with `[A-Za-z0-9_-]`.
fn words(text: &str, prefix: &str, boundary: impl Fn(char) -> bool) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices(prefix) {
        if text[..i].chars().next_back().is_some_and(&boundary) {
            continue;
        }
        let rest = &text[i + prefix.len()..];
        let n = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).unwrap_or(rest.len());
        if n > 0 && rest.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            found.insert(format!("{prefix}{}", &rest[..n]));
        }
    }
    found
}

fn flags(text: &str) -> BTreeSet<String> {
    words(text, "--", |c| c.is_ascii_alphanumeric() || c == '-').into_iter().map(|f| f.trim_end_matches(['-', '_']).to_owned()).collect()
}

fn variables(text: &str) -> BTreeSet<String> {
    words(text, "VMAAS_", |c| c.is_ascii_alphanumeric() || c == '_').into_iter().map(|v| v.trim_end_matches('_').to_owned()).collect()
}

/// README.md and every Markdown file under docs/.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("docs/").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                docs.push(p);
            }
        }
    }
    docs.sort();
    docs
}

/// Every flag the project's scripts document in their comments (their usage).
fn script_flags() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(root().join("scripts")).expect("scripts/").flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let comments: String = text.lines().filter(|l| l.trim_start().starts_with('#')).map(|l| format!("{l}\n")).collect();
        out.extend(flags(&comments));
    }
    out
}

/// Every environment variable the project's scripts read or set.
fn script_variables() -> BTreeSet<String> {
    let mut vars = BTreeSet::new();
    for e in std::fs::read_dir(root().join("scripts")).expect("scripts/").flatten() {
        vars.extend(variables(&std::fs::read_to_string(e.path()).unwrap_or_default()));
    }
    vars
}

#[test]
fn the_docs_name_only_flags_and_variables_that_exist() {
    let mut help = String::new();
    for b in BINARIES {
        let bin = vmaas_tests::bin(b);
        assert!(bin.exists(), "{} is built (cargo build --workspace --bins)", bin.display());
        help_tree(&bin, &mut Vec::new(), &mut help);
    }
    let (mut known_flags, mut known_vars) = (flags(&help), variables(&help));
    assert!(known_flags.contains("--listen") && known_vars.contains("VMAAS_LISTEN"), "the help was read:\n{help}");
    known_vars.extend(script_variables());
    known_flags.extend(script_flags());
    let mut wrong = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("a document");
        let name = doc.strip_prefix(root()).unwrap_or(&doc).display().to_string();
        let mut continued_other = false;
        for (n, line) in text.lines().enumerate() {
            // A command of another tool goes on over lines ending in `\`.
            let other = continued_other || OTHER_TOOLS.iter().any(|t| line.contains(t));
            continued_other = other && line.trim_end().ends_with('\\');
            let ours = !other;
            for f in flags(line).into_iter().filter(|f| ours && !known_flags.contains(f)) {
                wrong.push(format!("{name}:{}: flag {f} is in no binary's --help", n + 1));
            }
            for v in variables(line).into_iter().filter(|v| !known_vars.contains(v)) {
                wrong.push(format!("{name}:{}: {v} is read by no binary (--help) and no script", n + 1));
            }
        }
    }
    assert!(wrong.is_empty(), "the documents name what does not exist:\n{}", wrong.join("\n"));
}

#[test]
fn words_are_cut_at_their_ends() {
    assert_eq!(flags("run `--listen 1` and --data-dir, not a--b"), BTreeSet::from(["--listen".into(), "--data-dir".into()]));
    assert_eq!(variables("`VMAAS_LISTEN`, XVMAAS_NO, VMAAS_A_B."), BTreeSet::from(["VMAAS_LISTEN".into(), "VMAAS_A_B".into()]));
}
