//! Stamps the extension with a fingerprint of the Rust sources it was built from, so that
//! Python can tell an extension older than the sources (`ddflow._native.SOURCE_FINGERPRINT`,
//! compared by `ddflow.runtime.native.build_info` with the files on disk).
//!
//! The fingerprint is FNV-1a (64 bits) over every source file of the workspace (`*.rs`,
//! `Cargo.toml`, `Cargo.lock`; `target/` left out), in the order of their paths relative to
//! the workspace, each as its path, a zero byte, its bytes and a zero byte.

use std::fs;
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") || name == "Cargo.toml" || name == "Cargo.lock" {
            out.push(path);
        }
    }
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let workspace = Path::new(&manifest)
        .parent()
        .expect("the binding crate lies inside the workspace")
        .to_path_buf();
    let mut files = Vec::new();
    sources(&workspace, &mut files);
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(&workspace).unwrap_or(&p);
            (rel.to_string_lossy().replace('\\', "/"), p)
        })
        .collect();
    named.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (rel, path) in &named {
        feed(rel.as_bytes());
        feed(&[0]);
        feed(&fs::read(path).expect("a source file of the workspace is readable"));
        feed(&[0]);
        println!("cargo:rerun-if-changed={}", path.display());
    }
    println!("cargo:rerun-if-changed={}", workspace.display());
    println!("cargo:rustc-env=DDFLOW_SOURCE_FINGERPRINT={hash:016x}");
    let profile = std::env::var("PROFILE").unwrap_or_default();
    println!("cargo:rustc-env=DDFLOW_BUILD_PROFILE={profile}");
}
