//! Names of the objects rendered for one vmaas object: readable, stable
//! across releases, and always valid Kubernetes names.

/// Longest name of an object whose name must be a DNS label (a VM, whose
/// VMI names its pod's host; a Service; a network).
pub const MAX_NAME: usize = 63;

/// Hex digits of the hash that keeps shortened names distinct.
const HASH_DIGITS: usize = 8;

/// `base-suffix` when that fits in [`MAX_NAME`] characters; otherwise a
/// readable prefix of it, a dash and a short hash of the whole name, so two
/// long names that share their prefix still differ.
pub fn derived(base: &str, suffix: &str) -> String {
    let full = if suffix.is_empty() { base.to_owned() } else { format!("{base}-{suffix}") };
    if full.len() <= MAX_NAME {
        return full;
    }
    let keep = MAX_NAME - HASH_DIGITS - 1;
    // Names are ASCII (DNS labels); a prefix never ends in a dash.
    let prefix = full[..keep].trim_end_matches(['-', '.']);
    format!("{prefix}-{:0width$x}", fnv1a(&full) & 0xffff_ffff, width = HASH_DIGITS)
}

/// A name unique to `parts` (e.g. a tenant and its object's name): the
/// parts joined by dashes, then a dash and a hash of the parts themselves,
/// so `a-b` + `c` and `a` + `b-c` never meet, and names of two tenants
/// never collide in a cluster-wide space (namespaces).
///
/// When the joined parts fit whole, only another placing of the dashes
/// reads the same, a handful of fixed candidates the 32-bit hash of older
/// releases tells apart (kept, so those names never move). When they are
/// cut to fit, whatever follows the cut is free to choose, so the hash is
/// 64 bits of SHA-256: no one finds parts whose name is another's.
pub fn unique(parts: &[&str]) -> String {
    let readable = parts.iter().filter(|p| !p.is_empty()).copied().collect::<Vec<_>>().join("-");
    // `/` is never in a Kubernetes name: the joined parts are unambiguous.
    let key = parts.join("/");
    if readable.len() < MAX_NAME - HASH_DIGITS {
        let prefix = readable.trim_end_matches(['-', '.']);
        return format!("{prefix}-{:0width$x}", fnv1a(&key) & 0xffff_ffff, width = HASH_DIGITS);
    }
    let keep = MAX_NAME - STRONG_DIGITS - 1;
    let prefix = readable[..keep].trim_end_matches(['-', '.']);
    format!("{prefix}-{}", strong_hash(&key))
}

/// Hex digits of the hash of a cut name in a cluster-wide space.
pub const STRONG_DIGITS: usize = 16;

/// 64 bits of the SHA-256 of `s`, in hex ([`STRONG_DIGITS`] digits): where
/// a name's hash must resist a search for another name with the same one.
pub fn strong_hash(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes()).iter().take(STRONG_DIGITS / 2).map(|b| format!("{b:02x}")).collect()
}

/// 64-bit FNV-1a: small, and fixed forever (a name must not change between
/// releases, or every object would be renamed).
pub fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_stay_readable_and_long_ones_fit_and_differ() {
        assert_eq!(derived("web", "root"), "web-root");
        assert_eq!(derived("web", ""), "web");
        let a = derived(&"a".repeat(60), "root");
        let b = derived(&"a".repeat(60), "data");
        assert!(a.len() <= MAX_NAME && b.len() <= MAX_NAME, "{a} {b}");
        assert_ne!(a, b);
        assert!(a.starts_with(&"a".repeat(40)), "{a}");
        assert_eq!(a, derived(&"a".repeat(60), "root"), "stable");
        let dashed = derived(&format!("{}-{}", "x".repeat(53), "y".repeat(10)), "net");
        assert!(!dashed.contains("--") && dashed.len() <= MAX_NAME, "{dashed}");
    }

    #[test]
    fn unique_names_fit_and_never_confuse_their_parts() {
        let a = unique(&["vmaas", "a-b", "c"]);
        let b = unique(&["vmaas", "a", "b-c"]);
        assert!(a.starts_with("vmaas-a-b-c-") && b.starts_with("vmaas-a-b-c-"), "{a} {b}");
        assert_ne!(a, b);
        let long = unique(&["vmaas", &"t".repeat(63), &"n".repeat(63)]);
        assert!(long.len() <= MAX_NAME && !long.contains("--"), "{long}");
        // Cut to fit: what follows the cut is free, so the hash is 64 bits of SHA-256.
        assert_eq!(long.rsplit('-').next().map(str::len), Some(16), "{long}");
        assert_ne!(long, unique(&["vmaas", &"t".repeat(63), &"n".repeat(62)]));
        // Whole: the name older releases gave (`vmaas-team-a-myvm-5122e27f` in the examples).
        assert_eq!(unique(&["vmaas", "team-a", "myvm"]), "vmaas-team-a-myvm-5122e27f");
        assert_eq!(long, unique(&["vmaas", &"t".repeat(63), &"n".repeat(63)]), "stable");
    }

    #[test]
    fn the_hash_is_the_published_fnv1a() {
        // Reference values of 64-bit FNV-1a.
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
