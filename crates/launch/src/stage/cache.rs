//! TEMPORARY stand-in (replaced by the staging cache of h/stage).
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct Cache {
    dir: PathBuf,
}

pub struct Inserter {
    tmp: PathBuf,
    dst: PathBuf,
    file: std::fs::File,
}

impl Write for Inserter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.file.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Inserter {
    pub fn finish(self) -> Result<PathBuf, String> {
        std::fs::rename(&self.tmp, &self.dst).map_err(|e| e.to_string())?;
        Ok(self.dst)
    }
}

impl Cache {
    pub fn open(dir: Option<PathBuf>, _max: Option<u64>) -> Result<Cache, String> {
        let dir = dir.unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/tmp".into()))
                .join(".cache/gridwire/stage")
        });
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        Ok(Cache { dir })
    }
    pub fn has(&self, hash: &str) -> Option<PathBuf> {
        let p = self.dir.join(hash);
        p.exists().then_some(p)
    }
    pub fn begin_insert(&self, hash: &str, _size: u64) -> Result<Inserter, String> {
        let tmp = self.dir.join(format!("{hash}.tmp"));
        let file = std::fs::File::create(&tmp).map_err(|e| e.to_string())?;
        Ok(Inserter { tmp, dst: self.dir.join(hash), file })
    }
    pub fn materialize(&self, files: &[(String, String, u32)], job_dir: &Path) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(job_dir).map_err(|e| e.to_string())?;
        for (name, hash, mode) in files {
            let d = job_dir.join(name);
            std::fs::copy(self.dir.join(hash), &d).map_err(|e| e.to_string())?;
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(*mode)).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
    pub fn remove_job_dir(&self, d: &Path) -> Result<(), String> {
        std::fs::remove_dir_all(d).map_err(|e| e.to_string())
    }
}
