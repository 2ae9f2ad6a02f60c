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

impl Catalog {
    /// Images in `dir`; `default` names the image used for `default`.
    pub fn new(dir: PathBuf, default: String) -> Self {
        Self { dir, default }
    }

    /// The images directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The image called `name`, or why there is none.
    pub fn get(&self, name: &str) -> Result<Image, String> {
        let name = if name == vmaas_model::spec::DEFAULT_IMAGE { self.default.as_str() } else { name };
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(format!("{name:?} is not an image name"));
        }
        let dir = self.dir.join(name);
        let path = dir.join("image.json");
        let text = std::fs::read_to_string(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!("image {name:?} does not exist in {} (build the test guest with scripts/guest-image.sh)", self.dir.display())
            } else {
                format!("reading {}: {e}", path.display())
            }
        })?;
        let manifest: ImageManifest = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let image = Image { manifest, dir };
        for p in [Some(image.disk()), image.kernel(), image.initrd()].into_iter().flatten() {
            if !p.exists() {
                return Err(format!("image {name:?} is incomplete: {} is missing", p.display()));
            }
        }
        Ok(image)
    }
}
