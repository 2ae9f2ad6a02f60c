//! The composed image, checked by the real `qemu-img`: `check` finds no
//! error or leak in it, and `compare` finds it reads as the bytes the
//! extents say.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use super::*;

/// A file of `len` bytes, each its offset's pattern byte `seed`-shifted.
fn file(dir: &Path, name: &str, len: u64, seed: u8) -> PathBuf {
    let p = dir.join(name);
    let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8 ^ seed).collect();
    std::fs::write(&p, bytes).expect("write");
    p
}

/// What the guest reads, byte for byte, as `extents` say, over `files`.
fn expected(virtual_size: u64, extents: &[Extent], files: &[PathBuf]) -> Vec<u8> {
    let mut out = vec![0u8; usize::try_from(virtual_size).expect("size")];
    for e in extents {
        if let Source::File { file, offset } = e.source {
            let bytes = std::fs::read(&files[file]).expect("read");
            let (s, o, n) = (e.start as usize, offset as usize, e.length as usize);
            out[s..s + n].copy_from_slice(&bytes[o..o + n]);
        }
    }
    out
}

/// Composes, writes the image out, and has `qemu-img` check it and compare
/// it with what the extents say: the image's length.
fn composed_matches(virtual_size: u64, extents: &[Extent], files: &[PathBuf], dir: &Path) -> u64 {
    let image = Arc::new(Composed::new(virtual_size, extents, files).expect("composed"));
    let mut bytes = Vec::new();
    image.reader().read_to_end(&mut bytes).expect("read");
    assert_eq!(bytes.len() as u64, image.size(), "the length said before is the length read");
    let out = dir.join("composed.qcow2");
    std::fs::File::create(&out).and_then(|mut f| f.write_all(&bytes)).expect("write");
    let raw = dir.join("expected.raw");
    std::fs::write(&raw, expected(virtual_size, extents, files)).expect("write");
    let check = Command::new("qemu-img").args(["check", "--output=json"]).arg(&out).output().expect("qemu-img");
    assert!(check.status.success(), "qemu-img check: {}{}", String::from_utf8_lossy(&check.stdout), String::from_utf8_lossy(&check.stderr));
    let report: serde_json::Value = serde_json::from_slice(&check.stdout).expect("json");
    assert_eq!(report["check-errors"], 0, "{report}");
    assert!(report.get("leaks").is_none() && report.get("corruptions").is_none(), "{report}");
    let compare = Command::new("qemu-img").args(["compare", "-f", "raw", "-F", "qcow2"]).arg(&raw).arg(&out).output().expect("qemu-img");
    assert!(compare.status.success(), "qemu-img compare: {}", String::from_utf8_lossy(&compare.stdout));
    let info = Command::new("qemu-img").args(["info", "--output=json"]).arg(&out).output().expect("qemu-img");
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).expect("json");
    assert_eq!(info["virtual-size"], virtual_size, "{info}");
    image.size()
}

#[test]
fn a_chain_of_two_files_with_zeros_gaps_and_unaligned_pieces_reads_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = vec![file(dir.path(), "top", 3 << 20, 0x5a), file(dir.path(), "base", 2 << 20, 0xa5)];
    let f = |file, offset| Source::File { file, offset };
    let extents = [
        Extent { start: 0, length: 512 << 10, source: f(1, 0) },
        // Not on a cluster's edge, and out of the file's order.
        Extent { start: (512 << 10) + 1000, length: 70_000, source: f(0, 123_457) },
        Extent { start: 1 << 20, length: 1 << 20, source: Source::Zero },
        Extent { start: 2 << 20, length: 64 << 10, source: f(1, 1 << 20) },
        Extent { start: (2 << 20) + (64 << 10), length: 3 << 10, source: f(0, 0) },
    ];
    let size = composed_matches(6 << 20, &extents, &files, dir.path());
    // Header, refcount table and block, L1, one L2, then 8 + 2 + 1 + 1 data clusters.
    assert_eq!(size, (5 + 12) * CLUSTER);
}

#[test]
fn data_past_one_l2_table_and_an_odd_virtual_size_read_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = vec![file(dir.path(), "top", 1 << 20, 7)];
    let gib = 1u64 << 30;
    let extents = [
        Extent { start: 0, length: 4096, source: Source::File { file: 0, offset: 0 } },
        // In the third L2 table's range, the guest ending a little past it, on a sector.
        Extent { start: gib + 12_345, length: 100_000, source: Source::File { file: 0, offset: 777 } },
    ];
    composed_matches(gib + 220 * 512, &extents, &files, dir.path());
}

#[test]
fn a_guest_with_no_data_is_its_tables_only_and_bad_maps_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = vec![file(dir.path(), "top", 4096, 1)];
    let size = composed_matches(10 << 20, &[Extent { start: 0, length: 10 << 20, source: Source::Zero }], &files, dir.path());
    assert_eq!(size, 4 * CLUSTER, "header, refcount table and block, L1");
    let overlapping = [
        Extent { start: 0, length: 8192, source: Source::File { file: 0, offset: 0 } },
        Extent { start: 4096, length: 4096, source: Source::Zero },
    ];
    let err = Composed::new(1 << 20, &overlapping, &files).expect_err("overlapping extents");
    assert!(err.to_string().contains("overlaps"), "{err}");
    let past = [Extent { start: 0, length: 4096, source: Source::File { file: 1, offset: 0 } }];
    let err = Composed::new(1 << 20, &past, &files).expect_err("a file past the chain");
    assert!(err.to_string().contains("past the chain"), "{err}");
}

#[test]
fn the_refcount_blocks_count_themselves_past_one_block() {
    // 32 768 clusters fill one refcount block: with the tables, two are needed.
    let layout = Layout::new(4 << 30, 5, REFCOUNTS - 3);
    assert_eq!(layout.refcount_blocks, 2);
    assert!(layout.refcount_blocks * REFCOUNTS >= layout.clusters());
    let small = Layout::new(1 << 20, 1, 16);
    assert_eq!((small.refcount_table, small.refcount_blocks), (1, 1));
}
