//! Info objects: ordered (key, value) string pairs.

use crate::error::{class, err, Result};

pub const MAX_KEY: usize = 255;
pub const MAX_VAL: usize = 1023;

#[derive(Debug, Default, Clone)]
pub struct Info {
    pub pairs: Vec<(String, String)>,
}

impl Info {
    pub fn set(&mut self, key: &str, val: &str) -> Result<()> {
        if key.is_empty() || key.len() > MAX_KEY {
            return Err(err(
                class::INFO_KEY,
                format!("info key {key:?} is empty or longer than {MAX_KEY}"),
            ));
        }
        if val.len() > MAX_VAL {
            return Err(err(
                class::INFO_VALUE,
                format!("info value for {key:?} is longer than {MAX_VAL}"),
            ));
        }
        match self.pairs.iter_mut().find(|(k, _)| k == key) {
            Some(p) => p.1 = val.to_string(),
            None => self.pairs.push((key.to_string(), val.to_string())),
        }
        Ok(())
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn delete(&mut self, key: &str) -> Result<()> {
        let n = self.pairs.len();
        self.pairs.retain(|(k, _)| k != key);
        if self.pairs.len() == n {
            return Err(err(
                class::INFO_NOKEY,
                format!("info key {key:?} is not set"),
            ));
        }
        Ok(())
    }
}
