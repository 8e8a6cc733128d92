//! Which shard a federation falls in: apart from [`crate::leadership::shards`] so that the member cache
//! (which files stamps by shard) can ask without depending on leadership. Also the one stable
//! hash the controller uses wherever a hash must agree across processes and builds.

/// FNV-1a over `bytes`: the same across builds, Rust versions and processes (the standard
/// hasher promises none of that), for shards, resync offsets, template hashes and names.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// The shard of a federation among `count`: stable across processes and releases (FNV-1a of
/// `namespace/name`), so that every replica agrees without talking.
pub fn shard_of(namespace: &str, name: &str, count: u32) -> u32 {
    if count <= 1 {
        return 0;
    }
    let h = fnv1a(namespace.bytes().chain(std::iter::once(b'/')).chain(name.bytes()));
    (h % u64::from(count)) as u32
}
