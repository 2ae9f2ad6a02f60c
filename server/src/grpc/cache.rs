//! Encoded responses of recent REST answers. A read of an object that has
//! not changed gets the same REST answer, byte for byte, as the last read:
//! its protobuf encoding is reused instead of being converted again.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use bytes::Bytes;

/// Entries kept at most; the cache starts over when it is full.
const CAPACITY: usize = 2048;

/// What a method's answer encoded to.
#[derive(Default)]
pub struct Encodings {
    entries: Mutex<HashMap<u64, Entry>>,
}

struct Entry {
    method: String,
    answer: Bytes,
    encoded: Bytes,
}

impl Encodings {
    /// The encoding of `answer` to `method`, if it was made recently.
    pub fn get(&self, method: &str, answer: &[u8]) -> Option<Bytes> {
        let entries = self.entries.lock().ok()?;
        let e = entries.get(&key(method, answer))?;
        (e.method == method && e.answer == answer).then(|| e.encoded.clone())
    }

    /// Remembers that `answer` to `method` encodes to `encoded`.
    pub fn put(&self, method: &str, answer: Bytes, encoded: Bytes) {
        let Ok(mut entries) = self.entries.lock() else { return };
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(key(method, &answer), Entry { method: method.to_owned(), answer, encoded });
    }
}

fn key(method: &str, answer: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    method.hash(&mut h);
    answer.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_answer_to_the_same_method_hits() {
        let c = Encodings::default();
        c.put("/a/Get", Bytes::from_static(b"{\"id\":1}"), Bytes::from_static(b"\x0a\x011"));
        assert_eq!(c.get("/a/Get", b"{\"id\":1}").as_deref(), Some(&b"\x0a\x011"[..]));
        assert_eq!(c.get("/a/Get", b"{\"id\":2}"), None);
        assert_eq!(c.get("/b/Get", b"{\"id\":1}"), None);
    }

    #[test]
    fn a_full_cache_starts_over() {
        let c = Encodings::default();
        for i in 0..=CAPACITY {
            c.put("/a/Get", Bytes::from(i.to_string()), Bytes::new());
        }
        assert_eq!(c.entries.lock().unwrap().len(), 1);
    }
}
