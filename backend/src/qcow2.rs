//! A qcow2 image composed as it is read: what a chain of disk files
//! (a qcow2 over its backing files) reads as, written out in order as one
//! self-contained qcow2 (version 3, 64 KiB clusters, 16-bit refcounts, no
//! backing file) without a file of its own. Its layout is computed first
//! from the chain's map (which guest ranges read from where); then its
//! tables come from memory and its data clusters are read from the
//! chain's files where they lie, in guest order, so the image can be sent
//! from its first byte, with its length known before.
//!
//! The layout: the header's cluster, the refcount table, the refcount
//! blocks, the L1 table, one L2 table for each 512 MiB of the guest that
//! holds data, then one cluster for each 64 KiB of the guest that holds
//! data (parts of it not in the chain read as zeros); a guest cluster with
//! no data is left unallocated, and so reads as zeros.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

/// The cluster size, in bits and in bytes.
const CLUSTER_BITS: u32 = 16;
const CLUSTER: u64 = 1 << CLUSTER_BITS;
/// Entries in an L2 table: the guest clusters one L2 table maps.
const L2_ENTRIES: u64 = CLUSTER / 8;
/// Entries in a refcount block (16-bit refcounts).
const REFCOUNTS: u64 = CLUSTER / 2;
/// The flag of an L1 or L2 entry whose cluster has a refcount of one.
const COPIED: u64 = 1 << 63;
/// The length of a version 3 header.
const HEADER_LENGTH: u32 = 104;

/// Where a guest range reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Zeros (a range no file of the chain holds data for).
    Zero,
    /// The bytes of file `file` (an index into the chain's files) from `offset`.
    File {
        /// Which of the chain's files.
        file: usize,
        /// Where in it the range begins.
        offset: u64,
    },
}

/// A range of the guest and where it reads from, as the chain's map says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Its first guest byte.
    pub start: u64,
    /// Its length in bytes.
    pub length: u64,
    /// Where it reads from.
    pub source: Source,
}

/// Why a chain cannot be composed.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    /// The map's extents overlap, are out of order or name no file.
    #[error("the disk's map is not usable: {0}")]
    Map(String),
    /// A file of the chain could not be opened.
    #[error("opening {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A run of the composed image's data region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    /// Its first byte in the image.
    at: u64,
    /// Its length.
    len: u64,
    /// Where its bytes come from.
    source: Source,
}

/// A composed image: its tables in memory, its data where the chain's
/// files hold it (opened when composed, so a file renamed or removed
/// afterwards is still read whole).
#[derive(Debug)]
pub struct Composed {
    /// Every byte before the data region: the header and the tables.
    meta: Vec<u8>,
    /// The data region, in order and without gaps.
    runs: Vec<Run>,
    /// The chain's files, top first.
    files: Vec<File>,
    /// The image's length.
    size: u64,
}

/// The counts that fix the layout.
#[derive(Debug, Clone, Copy)]
struct Layout {
    l1_entries: u64,
    l1_clusters: u64,
    l2_tables: u64,
    refcount_table: u64,
    refcount_blocks: u64,
    data: u64,
}

impl Layout {
    /// The layout of an image of `virtual_size` with `data` guest clusters
    /// holding data under `l2_tables` L2 tables.
    fn new(virtual_size: u64, l2_tables: u64, data: u64) -> Self {
        let l1_entries = virtual_size.div_ceil(CLUSTER * L2_ENTRIES);
        let l1_clusters = (l1_entries * 8).div_ceil(CLUSTER).max(1);
        let fixed = 1 + l1_clusters + l2_tables + data;
        let (mut refcount_table, mut refcount_blocks) = (1, 1);
        // The refcount blocks count themselves and the table: a fixed point.
        loop {
            let blocks = (fixed + refcount_table + refcount_blocks).div_ceil(REFCOUNTS);
            let table = (blocks * 8).div_ceil(CLUSTER);
            if (table, blocks) == (refcount_table, refcount_blocks) {
                break;
            }
            (refcount_table, refcount_blocks) = (table, blocks);
        }
        Self { l1_entries, l1_clusters, l2_tables, refcount_table, refcount_blocks, data }
    }

    fn refcount_table_at(&self) -> u64 {
        CLUSTER
    }
    fn refcount_blocks_at(&self) -> u64 {
        self.refcount_table_at() + self.refcount_table * CLUSTER
    }
    fn l1_at(&self) -> u64 {
        self.refcount_blocks_at() + self.refcount_blocks * CLUSTER
    }
    fn l2_at(&self) -> u64 {
        self.l1_at() + self.l1_clusters * CLUSTER
    }
    fn data_at(&self) -> u64 {
        self.l2_at() + self.l2_tables * CLUSTER
    }
    fn clusters(&self) -> u64 {
        self.data_at() / CLUSTER + self.data
    }
}

/// Writes `v` big-endian into `buf` at `at`.
fn put(buf: &mut [u8], at: u64, v: &[u8]) {
    let range = usize::try_from(at).ok().and_then(|a| Some(a..a.checked_add(v.len())?));
    if let Some(dst) = range.and_then(|r| buf.get_mut(r)) {
        dst.copy_from_slice(v);
    }
}

impl Composed {
    /// Composes the image of a guest of `virtual_size` bytes whose map is
    /// `extents` (in guest order, not overlapping; a gap reads as zeros)
    /// over the chain's `files` (top first), opening them.
    pub fn new(virtual_size: u64, extents: &[Extent], files: &[PathBuf]) -> Result<Self, ComposeError> {
        check(extents, files.len())?;
        let allocated = allocated(extents);
        let l2: Vec<u64> = dedup(allocated.iter().map(|g| g / L2_ENTRIES));
        let layout = Layout::new(virtual_size, l2.len() as u64, allocated.len() as u64);
        let meta = tables(virtual_size, &layout, &allocated, &l2);
        let runs = runs(layout.data_at(), extents, &allocated);
        let files = files
            .iter()
            .map(|p| File::open(p).map_err(|source| ComposeError::Open { path: p.clone(), source }))
            .collect::<Result<_, _>>()?;
        Ok(Self { meta, runs, files, size: layout.clusters() * CLUSTER })
    }

    /// The image's length in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// A reader of the image from its first byte.
    pub fn reader(self: &Arc<Self>) -> Reader {
        Reader { image: self.clone(), pos: 0, run: 0 }
    }

    /// Fills as much of `buf` as one source gives from image byte `pos`
    /// (run `*run` or after it): the count, 0 at the end.
    fn read_at(&self, pos: u64, run: &mut usize, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(rest) = usize::try_from(pos).ok().and_then(|p| self.meta.get(p..)).filter(|r| !r.is_empty()) {
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            return Ok(n);
        }
        while self.runs.get(*run).is_some_and(|r| r.at + r.len <= pos) {
            *run += 1;
        }
        let Some(r) = self.runs.get(*run) else { return Ok(0) };
        let into = pos - r.at;
        let n = usize::try_from(r.len - into).unwrap_or(usize::MAX).min(buf.len());
        match r.source {
            Source::Zero => buf[..n].fill(0),
            Source::File { file, offset } => {
                let f = self.files.get(file).ok_or_else(|| std::io::Error::other("a run names no file"))?;
                f.read_exact_at(&mut buf[..n], offset + into)?;
            }
        }
        Ok(n)
    }
}

/// The map's extents in order, not overlapping, naming files there are.
fn check(extents: &[Extent], files: usize) -> Result<(), ComposeError> {
    let mut end = 0;
    for e in extents {
        if e.start < end {
            return Err(ComposeError::Map(format!("the extent at {} overlaps the one before it", e.start)));
        }
        if let Source::File { file, .. } = e.source
            && file >= files
        {
            return Err(ComposeError::Map(format!("the extent at {} reads from file {file}, past the chain", e.start)));
        }
        end = e.start.checked_add(e.length).ok_or_else(|| ComposeError::Map(format!("the extent at {} ends past 2^64", e.start)))?;
    }
    Ok(())
}

/// `it` (sorted) without repeats.
fn dedup(it: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::new();
    for x in it {
        if v.last() != Some(&x) {
            v.push(x);
        }
    }
    v
}

/// The guest clusters any file's bytes fall in, in order.
fn allocated(extents: &[Extent]) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::new();
    for e in extents.iter().filter(|e| e.length > 0 && matches!(e.source, Source::File { .. })) {
        let first = (e.start / CLUSTER).max(v.last().map_or(0, |l| l + 1));
        v.extend(first..=(e.start + e.length - 1) / CLUSTER);
    }
    v
}

/// The header and every table, up to the data region.
fn tables(virtual_size: u64, l: &Layout, allocated: &[u64], l2: &[u64]) -> Vec<u8> {
    let mut m = vec![0u8; usize::try_from(l.data_at()).unwrap_or(0)];
    put(&mut m, 0, b"QFI\xfb");
    put(&mut m, 4, &3u32.to_be_bytes());
    put(&mut m, 20, &CLUSTER_BITS.to_be_bytes());
    put(&mut m, 24, &virtual_size.to_be_bytes());
    put(&mut m, 36, &u32::try_from(l.l1_entries).unwrap_or(u32::MAX).to_be_bytes());
    put(&mut m, 40, &l.l1_at().to_be_bytes());
    put(&mut m, 48, &l.refcount_table_at().to_be_bytes());
    put(&mut m, 56, &u32::try_from(l.refcount_table).unwrap_or(u32::MAX).to_be_bytes());
    put(&mut m, 96, &4u32.to_be_bytes());
    put(&mut m, 100, &HEADER_LENGTH.to_be_bytes());
    for b in 0..l.refcount_blocks {
        put(&mut m, l.refcount_table_at() + b * 8, &(l.refcount_blocks_at() + b * CLUSTER).to_be_bytes());
    }
    for c in 0..l.clusters() {
        put(&mut m, l.refcount_blocks_at() + c * 2, &1u16.to_be_bytes());
    }
    for (i, table) in l2.iter().enumerate() {
        put(&mut m, l.l1_at() + table * 8, &((l.l2_at() + i as u64 * CLUSTER) | COPIED).to_be_bytes());
    }
    let mut i = 0;
    for (k, g) in allocated.iter().enumerate() {
        while l2.get(i).is_some_and(|t| *t < g / L2_ENTRIES) {
            i += 1;
        }
        let entry = l.l2_at() + i as u64 * CLUSTER + (g % L2_ENTRIES) * 8;
        put(&mut m, entry, &((l.data_at() + k as u64 * CLUSTER) | COPIED).to_be_bytes());
    }
    m
}

/// The data region from `at`: each allocated guest cluster's 64 KiB, from
/// the extents over it (zeros where none holds data), runs merged where
/// they continue one another.
fn runs(at: u64, extents: &[Extent], allocated: &[u64]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    let mut push = |r: Run| {
        if let Some(last) = runs.last_mut() {
            let follows = match (last.source, r.source) {
                (Source::Zero, Source::Zero) => true,
                (Source::File { file: a, offset: o }, Source::File { file: b, offset: p }) => a == b && o + last.len == p,
                _ => false,
            };
            if follows && last.at + last.len == r.at {
                last.len += r.len;
                return;
            }
        }
        runs.push(r);
    };
    let mut e = 0;
    for (k, g) in allocated.iter().enumerate() {
        let (mut pos, end) = (g * CLUSTER, (g + 1) * CLUSTER);
        let out = at + k as u64 * CLUSTER;
        while pos < end {
            while extents.get(e).is_some_and(|x| x.start + x.length <= pos) {
                e += 1;
            }
            let (len, source) = match extents.get(e) {
                Some(x) if x.start <= pos => {
                    let len = (x.start + x.length).min(end) - pos;
                    let source = match x.source {
                        Source::File { file, offset } => Source::File { file, offset: offset + (pos - x.start) },
                        Source::Zero => Source::Zero,
                    };
                    (len, source)
                }
                Some(x) => (x.start.min(end) - pos, Source::Zero),
                None => (end - pos, Source::Zero),
            };
            push(Run { at: out + (pos - g * CLUSTER), len, source });
            pos += len;
        }
    }
    runs
}

/// A composed image read from its first byte.
#[derive(Debug)]
pub struct Reader {
    image: Arc<Composed>,
    pos: u64,
    run: usize,
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match self.image.read_at(self.pos, &mut self.run, &mut buf[n..])? {
                0 => break,
                k => {
                    n += k;
                    self.pos += k as u64;
                }
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
#[path = "qcow2_tests.rs"]
mod tests;
