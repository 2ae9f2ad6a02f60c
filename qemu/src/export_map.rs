//! A disk's chain as a composed export ([`vmaas_backend::qcow2`]): the
//! files under it (`qemu-img info --backing-chain`) and which guest range
//! reads from where in them (`qemu-img map`). A chain whose data cannot be
//! read in place (compressed or encrypted clusters, an external data file,
//! a format other than qcow2 or raw) is not composed: it is converted, as
//! before.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use tracing::info;
use vmaas_backend::BackendError;
use vmaas_backend::qcow2::{Composed, Extent, Source};

/// One file of the chain, as `qemu-img info --backing-chain` says.
#[derive(Debug, Deserialize)]
struct Layer {
    filename: PathBuf,
    format: String,
    #[serde(rename = "virtual-size")]
    virtual_size: u64,
    #[serde(default)]
    encrypted: bool,
    #[serde(rename = "format-specific", default)]
    specific: Option<serde_json::Value>,
}

/// One range of the guest, as `qemu-img map --output=json` says.
#[derive(Debug, Deserialize)]
struct Mapped {
    start: u64,
    length: u64,
    depth: usize,
    present: bool,
    zero: bool,
    data: bool,
    #[serde(default)]
    compressed: bool,
    offset: Option<u64>,
}

/// The export of the chain whose top is `disk`, composed (its files
/// opened); `None` when its data cannot be read in place.
pub(crate) async fn composed(qemu_img: &Path, disk: &Path) -> Result<Option<Composed>, BackendError> {
    let run = |args: &'static [&'static str]| async move {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).chain([disk.as_os_str()]).collect();
        crate::volumes::qemu_img(qemu_img, &args).await.map_err(|e| BackendError::transient("mapping the disk", e))
    };
    let info = run(&["info", "-U", "--backing-chain", "--output=json"]).await?;
    let map = run(&["map", "-U", "--output=json"]).await?;
    let parse = |e: serde_json::Error| BackendError::transient("reading qemu-img's account of the disk", e);
    let chain: Vec<Layer> = serde_json::from_slice(&info).map_err(parse)?;
    let mapped: Vec<Mapped> = serde_json::from_slice(&map).map_err(parse)?;
    let (size, extents, files) = match plan(&chain, &mapped) {
        Ok(p) => p,
        Err(why) => {
            info!(disk = %disk.display(), %why, "the export is converted into a file: its data is not all in place");
            return Ok(None);
        }
    };
    tokio::task::spawn_blocking(move || Composed::new(size, &extents, &files))
        .await
        .map_err(|e| BackendError::transient("composing the export", e))?
        .map(Some)
        .map_err(|e| BackendError::transient("composing the export", e))
}

/// Why a chain's data is not all in place.
#[derive(Debug, thiserror::Error)]
enum NotInPlace {
    /// A file of the chain is of another format, encrypted or with a data file.
    #[error("{file} is {format}, encrypted: {encrypted}, with a data file: {data_file}")]
    Layer { file: String, format: String, encrypted: bool, data_file: bool },
    /// `qemu-img info` named no file.
    #[error("qemu-img named no file")]
    NoFile,
    /// A range reads from no place in a file (compressed clusters).
    #[error("the {length} bytes at {start} are not in place (compressed, or not data)")]
    Range { start: u64, length: u64 },
}

/// The guest's size, its extents and the chain's files, if every byte of
/// data lies in place in a file of the chain; else why not.
fn plan(chain: &[Layer], mapped: &[Mapped]) -> Result<(u64, Vec<Extent>, Vec<PathBuf>), NotInPlace> {
    for l in chain {
        let data_file = l.specific.as_ref().and_then(|s| s.pointer("/data/data-file")).is_some();
        if !matches!(l.format.as_str(), "qcow2" | "raw") || l.encrypted || data_file {
            let file = l.filename.display().to_string();
            return Err(NotInPlace::Layer { file, format: l.format.clone(), encrypted: l.encrypted, data_file });
        }
    }
    let top = chain.first().ok_or(NotInPlace::NoFile)?;
    let mut extents = Vec::with_capacity(mapped.len());
    for m in mapped {
        let source = match (m.zero || !m.present, m.data, m.offset) {
            (true, _, _) => Source::Zero,
            (false, true, Some(offset)) if !m.compressed && m.depth < chain.len() => Source::File { file: m.depth, offset },
            _ => return Err(NotInPlace::Range { start: m.start, length: m.length }),
        };
        extents.push(Extent { start: m.start, length: m.length, source });
    }
    Ok((top.virtual_size, extents, chain.iter().map(|l| l.filename.clone()).collect()))
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::process::Command;
    use std::sync::Arc;

    use super::*;

    fn run(args: &[&str], dir: &Path) {
        let out = Command::new(args[0]).args(&args[1..]).current_dir(dir).output().expect("run");
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    #[tokio::test]
    async fn a_qcow2_over_a_raw_image_composes_into_what_reads_the_same_and_a_compressed_one_does_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        run(&["qemu-img", "create", "-q", "-f", "raw", "base.raw", "4M"], d);
        run(&["qemu-io", "-f", "raw", "-c", "write -P 0xaa 0 1M", "-c", "write -P 0xbb 3M 100k", "base.raw"], d);
        run(&["qemu-img", "create", "-q", "-f", "qcow2", "-b", "base.raw", "-F", "raw", "top.qcow2", "6M"], d);
        let writes = ["write -P 0xcc 512k 64k", "write -z 3M 64k", "write -P 1 5M 3k"];
        run(&["qemu-io", "-f", "qcow2", "-c", writes[0], "-c", writes[1], "-c", writes[2], "top.qcow2"], d);
        let image = composed("qemu-img".as_ref(), &d.join("top.qcow2")).await.expect("mapped").expect("composed");
        let image = Arc::new(image);
        let mut bytes = Vec::new();
        image.reader().read_to_end(&mut bytes).expect("read");
        assert_eq!(bytes.len() as u64, image.size());
        std::fs::File::create(d.join("out.qcow2")).and_then(|mut f| f.write_all(&bytes)).expect("write");
        run(&["qemu-img", "check", "-q", "out.qcow2"], d);
        run(&["qemu-img", "compare", "-q", "top.qcow2", "out.qcow2"], d);
        let info = Command::new("qemu-img").args(["info", "--output=json", "out.qcow2"]).current_dir(d).output().expect("info");
        let info: serde_json::Value = serde_json::from_slice(&info.stdout).expect("json");
        assert_eq!((info["virtual-size"].as_u64(), info.get("backing-filename")), (Some(6 << 20), None), "{info}");

        run(&["qemu-img", "convert", "-c", "-O", "qcow2", "top.qcow2", "packed.qcow2"], d);
        let packed = composed("qemu-img".as_ref(), &d.join("packed.qcow2")).await.expect("mapped");
        assert!(packed.is_none(), "compressed clusters are not read in place");
    }
}
