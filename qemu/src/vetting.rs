//! Whether an imported file is a disk image VMs may use: qcow2 or raw, and
//! nothing that would make QEMU read other files of the host (a qcow2
//! backing file or external data file), nor an archive, a web page or
//! another hypervisor's format passed off as a raw disk.

use std::io::Read;
use std::path::Path;

/// A file found fit: its format and the size the guest sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vetted {
    /// `qcow2` or `raw`.
    pub format: &'static str,
    /// The size the guest sees (a raw file's length).
    pub virtual_size: u64,
}

/// qcow2's incompatible feature bits this backend knows: dirty, corrupt,
/// external data file, compression type, extended L2.
const KNOWN_INCOMPATIBLE: u64 = 0b1_1111;
/// The external data file bit.
const DATA_FILE: u64 = 1 << 2;
/// The corrupt bit.
const CORRUPT: u64 = 1 << 1;

/// Formats refused as raw disks, by their first bytes.
const NOT_DISKS: [(&[u8], &str); 10] = [
    (b"\x1f\x8b", "a gzip archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (b"BZh", "a bzip2 archive"),
    (b"PK\x03\x04", "a zip archive"),
    (b"KDMV", "a VMDK disk"),
    (b"vhdxfile", "a VHDX disk"),
    (b"conectix", "a VHD disk"),
    (b"<<< ", "a VirtualBox VDI disk"),
    (b"#!", "a script"),
];

/// Why a file is refused as a disk image.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// It cannot be read.
    #[error("reading the file: {0}")]
    Unreadable(#[source] std::io::Error),
    /// It has no bytes.
    #[error("the file is empty")]
    Empty,
    /// Its first bytes say it is something else.
    #[error("the file is {0}, not a qcow2 or raw disk image")]
    NotADisk(&'static str),
    /// It is a web page or another markup file.
    #[error("the file is HTML or XML (a web page?), not a disk image")]
    Markup,
    /// A raw disk of a size that is not whole sectors.
    #[error("the file is not a disk image: raw disks are whole 512-byte sectors, and it has {0} bytes")]
    PartialSector(u64),
    /// The qcow2 header ends too soon.
    #[error("the qcow2 header is truncated")]
    Truncated,
    /// A qcow2 version QEMU does not read.
    #[error("qcow2 version {0} is not supported (2 or 3)")]
    Version(u32),
    /// It names a backing file.
    #[error("the qcow2 image names a backing file: QEMU would read another file of this host; flatten it first (qemu-img convert)")]
    BackingFile,
    /// It keeps its data in another file.
    #[error("the qcow2 image uses an external data file: QEMU would read another file of this host")]
    DataFile,
    /// It is marked corrupt.
    #[error("the qcow2 image is marked corrupt")]
    Corrupt,
    /// It needs features this QEMU may lack.
    #[error("the qcow2 image needs features this QEMU may not have (incompatible bits {0:#x})")]
    Features(u64),
    /// Its virtual size is zero.
    #[error("the qcow2 image has no size")]
    NoSize,
}

/// Vets the file at `path`: `Err` says why it is refused.
pub fn vet(path: &Path) -> Result<Vetted, Refused> {
    let mut f = std::fs::File::open(path).map_err(Refused::Unreadable)?;
    let len = f.metadata().map_err(Refused::Unreadable)?.len();
    let mut head = vec![0u8; 512];
    let n = f.read(&mut head).map_err(Refused::Unreadable)?;
    head.truncate(n);
    if head.starts_with(b"QFI\xfb") {
        return qcow2(&head);
    }
    if len == 0 {
        return Err(Refused::Empty);
    }
    if let Some((_, what)) = NOT_DISKS.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Err(Refused::NotADisk(what));
    }
    let text = head.iter().skip_while(|b| b.is_ascii_whitespace()).copied().collect::<Vec<u8>>();
    if text.starts_with(b"<") {
        return Err(Refused::Markup);
    }
    if len % 512 != 0 {
        return Err(Refused::PartialSector(len));
    }
    Ok(Vetted { format: "raw", virtual_size: len })
}

fn qcow2(h: &[u8]) -> Result<Vetted, Refused> {
    let be64 = |at: usize| h.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
    let be32 = |at: usize| h.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes);
    let (Some(version), Some(backing), Some(size)) = (be32(4), be64(8), be64(24)) else {
        return Err(Refused::Truncated);
    };
    if !(2..=3).contains(&version) {
        return Err(Refused::Version(version));
    }
    if backing != 0 {
        return Err(Refused::BackingFile);
    }
    if version == 3 {
        let features = be64(72).ok_or(Refused::Truncated)?;
        if features & DATA_FILE != 0 {
            return Err(Refused::DataFile);
        }
        if features & CORRUPT != 0 {
            return Err(Refused::Corrupt);
        }
        if features & !KNOWN_INCOMPATIBLE != 0 {
            return Err(Refused::Features(features));
        }
    }
    if size == 0 {
        return Err(Refused::NoSize);
    }
    Ok(Vetted { format: "qcow2", virtual_size: size })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::qemu_img;

    #[test]
    fn qcow2_and_raw_pass_and_what_reads_other_files_does_not() {
        let d = tempfile::tempdir().unwrap();
        let p = |n: &str| d.path().join(n);
        let s = |n: &str| p(n).to_string_lossy().into_owned();
        qemu_img(&["create", "-q", "-f", "qcow2", &s("base.qcow2"), "1G"]);
        assert_eq!(vet(&p("base.qcow2")).ok(), Some(Vetted { format: "qcow2", virtual_size: 1 << 30 }));
        qemu_img(&["create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", &s("base.qcow2"), &s("over.qcow2")]);
        assert!(vet(&p("over.qcow2")).unwrap_err().to_string().contains("backing file"));
        qemu_img(&["create", "-q", "-f", "qcow2", "-o", &format!("data_file={}", s("data.raw")), &s("ext.qcow2"), "64M"]);
        assert!(vet(&p("ext.qcow2")).unwrap_err().to_string().contains("external data file"));
        std::fs::write(p("disk.raw"), vec![0u8; 8192]).unwrap();
        assert_eq!(vet(&p("disk.raw")).ok(), Some(Vetted { format: "raw", virtual_size: 8192 }));
    }

    #[test]
    fn archives_pages_and_odd_sizes_are_not_disks() {
        let d = tempfile::tempdir().unwrap();
        for (bytes, why) in [
            (b"<!DOCTYPE html><html>404</html>".to_vec(), "HTML"),
            ([b"\x1f\x8b".to_vec(), vec![0; 510]].concat(), "gzip"),
            (vec![0u8; 1000], "512-byte sectors"),
            (Vec::new(), "empty"),
        ] {
            let f = d.path().join("f");
            std::fs::write(&f, &bytes).unwrap();
            let e = vet(&f).unwrap_err().to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
    }
}
