//! The NoCloud seed disk: a small FAT file system labelled `CIDATA` holding
//! the VM's `meta-data`, `user-data` and `network-config`, written in process
//! before every start and attached read-only as the last virtio disk.
//! cloud-init finds it by its label; the test guest's init does the same.

use std::io::{self, Seek, Write};
use std::path::Path;

use vmaas_model::nocloud::Seed;

/// The seed's file name in the VM's directory.
pub const FILE: &str = "cidata.img";

/// The volume label cloud-init looks for (FAT labels are upper case).
const LABEL: [u8; 11] = *b"CIDATA     ";

/// Room for the FAT structures around the files.
const OVERHEAD: u64 = 1 << 20;

/// The image size for `seed`: its files plus room, in whole MiB.
fn size_for(seed: &Seed) -> u64 {
    let files: u64 = seed.files().iter().map(|(_, body)| body.len() as u64 + 4096).sum();
    (files + OVERHEAD).div_ceil(1 << 20) * (1 << 20)
}

/// Writes the seed image at `path`, replacing any older one whole: it is
/// written beside it and renamed, so a reader never sees half of it.
pub fn write(path: &Path, seed: &Seed) -> io::Result<()> {
    let tmp = path.with_extension("img.new");
    let mut file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&tmp)?;
    file.set_len(size_for(seed))?;
    fatfs::format_volume(&mut file, fatfs::FormatVolumeOptions::new().volume_label(LABEL))?;
    file.rewind()?;
    {
        let fs = fatfs::FileSystem::new(&mut file, fatfs::FsOptions::new())?;
        for (name, body) in seed.files() {
            let mut f = fs.root_dir().create_file(name)?;
            f.truncate()?;
            f.write_all(body.as_bytes())?;
            f.flush()?;
        }
        fs.unmount()?;
    }
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use vmaas_model::CloudInit;

    use super::*;

    fn read_back(path: &Path) -> (String, Vec<(String, String)>) {
        let file = std::fs::File::open(path).unwrap();
        let fs = fatfs::FileSystem::new(file, fatfs::FsOptions::new()).unwrap();
        let mut files = Vec::new();
        for e in fs.root_dir().iter() {
            let e = e.unwrap();
            let mut body = String::new();
            e.to_file().read_to_string(&mut body).unwrap();
            files.push((e.file_name(), body));
        }
        files.sort();
        (fs.volume_label(), files)
    }

    #[test]
    fn the_seed_is_a_fat_volume_labelled_cidata_with_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let ci =
            CloudInit { user_data: Some("#cloud-config\nruncmd: [touch /x]\n".into()), ssh_keys: vec!["ssh-ed25519 AAAAC3Nz k".into()] };
        let nic = vmaas_model::nocloud::SeedNic { mac: "52:54:00:12:34:56", fixed: None };
        let seed = vmaas_model::nocloud::seed("id-1", "web", &ci, &[nic]);
        write(&path, &seed).unwrap();
        let (label, files) = read_back(&path);
        assert_eq!(label.trim_end(), "CIDATA");
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["meta-data", "network-config", "user-data"]);
        assert_eq!(files[2].1, "#cloud-config\nruncmd: [touch /x]\n");
        assert!(files[0].1.contains("local-hostname: \"web\""));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 << 20);
        // Rewritten whole with new content, and no temporary file left.
        let big = CloudInit { user_data: Some("#".repeat(60_000)), ssh_keys: vec![] };
        write(&path, &vmaas_model::nocloud::seed("id-1", "web", &big, &[])).unwrap();
        let (_, files) = read_back(&path);
        assert_eq!(files[2].1.len(), 60_000);
        assert!(!files[0].1.contains("public-keys"));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
