//! Base images: each a directory holding `image.json`, a base disk, and
//! optionally a kernel and initrd to boot directly.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// An image's `image.json`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageManifest {
    /// The image's name.
    pub name: String,
    /// What it is.
    #[serde(default)]
    pub description: String,
    /// Kernel to boot directly (relative to the image directory).
    #[serde(default)]
    pub kernel: Option<String>,
    /// Initrd for the kernel.
    #[serde(default)]
    pub initrd: Option<String>,
    /// Base disk (qcow2); VMs get copy-on-write overlays of it.
    pub disk: String,
    /// Kernel command line.
    #[serde(default)]
    pub cmdline: Option<String>,
    /// Whether its init can be a template for clones: booted with
    /// `vmaas.template` (on its kernel command line, or in an SMBIOS OEM
    /// string when its firmware boots it), it prints `vmaas-guest: template settled` before
    /// taking any identity and waits for a seed disk, then configures
    /// every NIC the seed names (see `qemu/src/snapshot.rs`).
    #[serde(default)]
    pub clone_hook: bool,
    /// The firmware it boots by (`bios` or `efi`), if it needs one.
    #[serde(default)]
    pub firmware: Option<vmaas_model::Firmware>,
    /// Whether it boots under Secure Boot (a signed boot chain).
    #[serde(default)]
    pub secure_boot: Option<bool>,
    /// Whether it wants a TPM.
    #[serde(default)]
    pub tpm: Option<bool>,
    /// `linux` or `windows`.
    #[serde(default)]
    pub guest_os_family: Option<vmaas_model::GuestOsFamily>,
}

impl ImageManifest {
    /// What the image says about the platform its guest expects.
    pub fn profile(&self) -> vmaas_model::GuestProfile {
        vmaas_model::GuestProfile {
            firmware: self.firmware,
            secure_boot: self.secure_boot,
            tpm: self.tpm,
            guest_os_family: self.guest_os_family,
        }
    }
}

/// A resolved image.
#[derive(Debug, Clone)]
pub struct Image {
    /// Its manifest.
    pub manifest: ImageManifest,
    /// Its directory.
    pub dir: PathBuf,
}

impl Image {
    /// Path of the base disk.
    pub fn disk(&self) -> PathBuf {
        self.dir.join(&self.manifest.disk)
    }

    /// Path of the kernel, if the image boots one directly.
    pub fn kernel(&self) -> Option<PathBuf> {
        self.manifest.kernel.as_ref().map(|k| self.dir.join(k))
    }

    /// Path of the initrd, if any.
    pub fn initrd(&self) -> Option<PathBuf> {
        self.manifest.initrd.as_ref().map(|k| self.dir.join(k))
    }
}

/// Finds images by name in a directory.
#[derive(Debug, Clone)]
pub struct Catalog {
    dir: PathBuf,
    default: String,
}

/// Why an image cannot be booted from or copied.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The name cannot name a directory of the catalog.
    #[error("{0:?} is not an image name")]
    BadName(String),
    /// The catalog has no such image.
    #[error("image {name:?} does not exist in {} (build the test guest with scripts/guest-image.sh)", dir.display())]
    Missing {
        /// The image.
        name: String,
        /// The catalog's directory.
        dir: PathBuf,
    },
    /// A file of it cannot be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Its manifest (or an import's record) is not what it should be.
    #[error("{}: {source}", path.display())]
    Manifest {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// A file its manifest names is missing.
    #[error("image {name:?} is incomplete: {} is missing", path.display())]
    Incomplete {
        /// The image.
        name: String,
        /// The missing file.
        path: PathBuf,
    },
    /// Its disk's header cannot be read.
    #[error("reading its disk: {0}")]
    Disk(#[source] std::io::Error),
    /// An imported image that is not (or no longer) whole.
    #[error("imported image {id} is not ready: {source}")]
    NotReady {
        /// The import.
        id: String,
        /// Why.
        source: std::io::Error,
    },
}

impl Catalog {
    /// Images in `dir`; `default` names the image used for `default`.
    pub fn new(dir: PathBuf, default: String) -> Self {
        Self { dir, default }
    }

    /// The images directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every image of the directory, by name, with its disk's format and
    /// size, or why VMs cannot boot from it.
    pub fn list(&self) -> Vec<vmaas_backend::CatalogImage> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.path().join("image.json").is_file())
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| !n.starts_with('.') && !n.ends_with(".new"))
            .collect();
        names.sort();
        names.into_iter().map(|name| self.describe(name)).collect()
    }

    fn describe(&self, name: String) -> vmaas_backend::CatalogImage {
        let default = name == self.default;
        let mut out = vmaas_backend::CatalogImage {
            name,
            description: String::new(),
            format: String::new(),
            virtual_size: 0,
            problem: None,
            default,
        };
        match self.get(&out.name).and_then(|i| probe(&i.disk()).map(|d| (i, d)).map_err(ImageError::Disk)) {
            Ok((image, disk)) => {
                out.description = image.manifest.description;
                out.format = disk.format.into();
                out.virtual_size = disk.virtual_size;
            }
            Err(m) => out.problem = Some(m.to_string()),
        }
        out
    }

    /// The image called `name`, or why there is none.
    pub fn get(&self, name: &str) -> Result<Image, ImageError> {
        let name = if name == vmaas_model::spec::DEFAULT_IMAGE { self.default.as_str() } else { name };
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(ImageError::BadName(name.to_owned()));
        }
        let dir = self.dir.join(name);
        let path = dir.join("image.json");
        let text = std::fs::read_to_string(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ImageError::Missing { name: name.to_owned(), dir: self.dir.clone() }
            } else {
                ImageError::Read { path: path.clone(), source: e }
            }
        })?;
        let manifest: ImageManifest = serde_json::from_str(&text).map_err(|e| ImageError::Manifest { path: path.clone(), source: e })?;
        let image = Image { manifest, dir };
        for p in [Some(image.disk()), image.kernel(), image.initrd()].into_iter().flatten() {
            if !p.exists() {
                return Err(ImageError::Incomplete { name: name.to_owned(), path: p });
            }
        }
        Ok(image)
    }
}

/// What a disk file's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskInfo {
    /// `qcow2` or `raw`.
    pub format: &'static str,
    /// The size the guest sees, in bytes.
    pub virtual_size: u64,
    /// Whether a qcow2 header names a backing file.
    pub has_backing_file: bool,
}

/// Reads a disk's header: a qcow2 file (magic `QFI\xfb`: the virtual size
/// at byte 24, the backing file's offset at byte 8), else raw (its length).
pub fn probe(path: &Path) -> std::io::Result<DiskInfo> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut header = [0u8; 32];
    let n = f.read(&mut header)?;
    if n == header.len() && header[..4] == *b"QFI\xfb" {
        let be = |at: usize| u64::from_be_bytes(header[at..at + 8].try_into().unwrap_or_default());
        return Ok(DiskInfo { format: "qcow2", virtual_size: be(24), has_backing_file: be(8) != 0 });
    }
    Ok(DiskInfo { format: "raw", virtual_size: f.metadata()?.len(), has_backing_file: false })
}

/// Runs `qemu-img` with `args` in a test; it must succeed.
#[cfg(test)]
pub(crate) fn qemu_img(args: &[&str]) {
    let out = std::process::Command::new("qemu-img").args(args).output().expect("qemu-img");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_give_format_size_and_backing_files() {
        let d = tempfile::tempdir().unwrap();
        let p = |n: &str| d.path().join(n).to_string_lossy().into_owned();
        qemu_img(&["create", "-q", "-f", "qcow2", &p("base.qcow2"), "3G"]);
        qemu_img(&["create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", &p("base.qcow2"), &p("over.qcow2"), "5G"]);
        std::fs::write(p("disk.raw"), vec![0u8; 4096]).unwrap();
        assert_eq!(
            probe(Path::new(&p("base.qcow2"))).unwrap(),
            DiskInfo { format: "qcow2", virtual_size: 3 << 30, has_backing_file: false }
        );
        assert_eq!(
            probe(Path::new(&p("over.qcow2"))).unwrap(),
            DiskInfo { format: "qcow2", virtual_size: 5 << 30, has_backing_file: true }
        );
        assert_eq!(probe(Path::new(&p("disk.raw"))).unwrap(), DiskInfo { format: "raw", virtual_size: 4096, has_backing_file: false });
    }

    #[test]
    fn the_catalog_lists_images_and_says_what_is_wrong_with_one() {
        let d = tempfile::tempdir().unwrap();
        let good = d.path().join("good");
        std::fs::create_dir(&good).unwrap();
        qemu_img(&["create", "-q", "-f", "qcow2", &good.join("disk.qcow2").to_string_lossy(), "1G"]);
        std::fs::write(good.join("image.json"), r#"{"name": "good", "description": "a disk", "disk": "disk.qcow2"}"#).unwrap();
        let broken = d.path().join("broken");
        std::fs::create_dir(&broken).unwrap();
        std::fs::write(broken.join("image.json"), r#"{"name": "broken", "disk": "gone.qcow2"}"#).unwrap();
        std::fs::create_dir(d.path().join("not-an-image")).unwrap();
        let list = Catalog::new(d.path().to_owned(), "good".into()).list();
        let names: Vec<&str> = list.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["broken", "good"]);
        assert!(list[0].problem.as_deref().unwrap().contains("gone.qcow2 is missing"), "{:?}", list[0]);
        assert_eq!((list[1].format.as_str(), list[1].virtual_size, list[1].description.as_str()), ("qcow2", 1 << 30, "a disk"));
        assert!(list[1].default && !list[0].default);
    }
}
