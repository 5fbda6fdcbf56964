//! The ANN index (`store::ann`) against the exact scan: agreement on a clustered set, deleted rows,
//! rows added since the build, modes, and files that must not be used (corrupt, truncated, another
//! model). Small sets, built single-threaded (reproducible graphs); margins hold on any CPU since
//! candidates are rescored with the exact integer dot product.

use std::collections::HashSet;
use std::path::Path;

use llm_wiki_core::store::ann::{self, AnnMode, AnnRef};
use llm_wiki_core::store::vectors::{write_segment, VectorIndex, VectorManifest};

const DIMS: usize = 64;

/// Deterministic pseudo-random numbers in [-0.5, 0.5) (xorshift).
fn rng(seed: u64) -> impl FnMut() -> f32 {
  let mut x = seed.max(1);
  move || {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    (x >> 11) as f32 / (1u64 << 53) as f32 - 0.5
  }
}

fn unit(v: Vec<f32>) -> Vec<f32> {
  let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
  v.into_iter().map(|x| x / n).collect()
}

/// `n` unit vectors around `clusters` random centres (noise 0.35 of a centre's norm per dim scale).
fn clustered(seed: u64, n: usize, clusters: usize) -> Vec<Vec<f32>> {
  let mut r = rng(seed);
  let centres: Vec<Vec<f32>> = (0..clusters).map(|_| unit((0..DIMS).map(|_| r()).collect())).collect();
  (0..n).map(|i| unit(centres[i % clusters].iter().map(|c| c + 0.35 * r() / 4.0).collect())).collect()
}

/// Segment `a.vec` with chunk ids 1..=n, an ANN file over all of them, and the manifest.
fn store(dir: &Path, vecs: &[Vec<f32>]) -> VectorManifest {
  let rows: Vec<(u64, Vec<f32>)> = vecs.iter().cloned().enumerate().map(|(i, v)| (i as u64 + 1, v)).collect();
  let seg = write_segment(dir, "a.vec", DIMS, &rows).unwrap();
  let mut vm = VectorManifest { model: "m".into(), dims: DIMS, segments: vec![seg], ann: None };
  let all: HashSet<u64> = (1..=vecs.len() as u64).collect();
  let idx = VectorIndex::open_with(dir, &vm, &all, AnnMode::Off).unwrap();
  vm.ann = Some(ann::build(dir, "ann-1.ann", "m", DIMS, &idx.live_row_data()).unwrap());
  vm
}

fn queries(seed: u64, n: usize) -> Vec<Vec<f32>> {
  clustered(seed, n, 25)
}

fn recall(approx: &[(u64, f32)], exact: &[(u64, f32)]) -> f64 {
  let e: HashSet<u64> = exact.iter().map(|h| h.0).collect();
  approx.iter().filter(|h| e.contains(&h.0)).count() as f64 / exact.len().max(1) as f64
}

#[test]
fn ann_top_k_agrees_with_the_exact_scan_on_a_clustered_set() {
  let t = tempfile::tempdir().unwrap();
  let vm = store(t.path(), &clustered(3, 4000, 40));
  let live: HashSet<u64> = (1..=4000).collect();
  let idx = VectorIndex::open_with(t.path(), &vm, &live, AnnMode::On).unwrap();
  assert!(idx.ann_wanted());
  assert_eq!(idx.ann_diagnostic(), None);
  assert_eq!(idx.ann_staleness(), Some((0, 0, 4000)));
  let mut total = 0.0;
  let qs = queries(11, 60);
  for q in &qs {
    let exact = idx.search_with(q, 10, false);
    let approx = idx.search_ann(q, 10).expect("a usable index");
    assert_eq!(approx, idx.search(q, 10));
    // Scores are the exact scan's own (rescored), best first.
    for (id, s) in &approx {
      let e = idx.search_with(q, 4000, false).into_iter().find(|h| h.0 == *id).unwrap();
      assert_eq!(e.1, *s);
    }
    assert!(approx.windows(2).all(|w| w[0].1 >= w[1].1));
    total += recall(&approx, &exact);
  }
  let mean = total / qs.len() as f64;
  // HNSW at M = 16, ef = 128 on 4,000 clustered rows: 0.99+ measured; 0.9 leaves room for any CPU.
  assert!(mean >= 0.9, "mean recall@10 {mean}");
}

#[test]
fn deleted_rows_are_never_returned_and_delta_rows_are_found_before_a_rebuild() {
  let t = tempfile::tempdir().unwrap();
  let vecs = clustered(5, 3000, 30);
  let mut vm = store(t.path(), &vecs);
  let qs = queries(17, 30);
  // Every third chunk deleted, including each query's exact nearest neighbour.
  let mut dead: HashSet<u64> = (1..=3000).filter(|i| i % 3 == 0).collect();
  let all: HashSet<u64> = (1..=3000).collect();
  let full = VectorIndex::open_with(t.path(), &vm, &all, AnnMode::Off).unwrap();
  for q in &qs {
    dead.insert(full.search_with(q, 1, false)[0].0);
  }
  // New chunks after the build: the queries themselves (ids 10_001..), in a newer segment.
  let added: Vec<(u64, Vec<f32>)> =
    qs.iter().cloned().enumerate().map(|(i, v)| (10_001 + i as u64, v)).collect();
  vm.segments.push(write_segment(t.path(), "b.vec", DIMS, &added).unwrap());
  let live: HashSet<u64> = all.difference(&dead).copied().chain(10_001..10_001 + qs.len() as u64).collect();
  let idx = VectorIndex::open_with(t.path(), &vm, &live, AnnMode::On).unwrap();
  let (delta, tomb, rows) = idx.ann_staleness().unwrap();
  assert_eq!((delta, tomb, rows), (qs.len(), dead.len(), 3000));
  let mut total = 0.0;
  for (i, q) in qs.iter().enumerate() {
    let approx = idx.search_ann(q, 10).unwrap();
    assert!(approx.iter().all(|(id, _)| !dead.contains(id)), "a deleted row came back: {approx:?}");
    // The query's own vector, added after the build, is found (first: cosine 1).
    assert_eq!(approx[0].0, 10_001 + i as u64);
    total += recall(&approx, &idx.search_with(q, 10, false));
  }
  assert!(total / qs.len() as f64 >= 0.9, "mean recall@10 {}", total / qs.len() as f64);
}

#[test]
fn modes_decide_whether_the_index_is_used() {
  let t = tempfile::tempdir().unwrap();
  let vm = store(t.path(), &clustered(7, 500, 10));
  let live: HashSet<u64> = (1..=500).collect();
  let q = &queries(19, 1)[0];
  let exact = VectorIndex::open_with(t.path(), &vm, &live, AnnMode::Off).unwrap().search_with(q, 10, false);
  for (mode, wanted) in [(AnnMode::On, true), (AnnMode::Off, false), (AnnMode::Auto, false)] {
    let idx = VectorIndex::open_with(t.path(), &vm, &live, mode).unwrap();
    assert_eq!(idx.ann_wanted(), wanted, "{mode:?}");
    assert_eq!(idx.ann_diagnostic(), None, "{mode:?}");
    // 500 clustered rows: the graph finds the exact top 10 here.
    assert_eq!(idx.search(q, 10), exact, "{mode:?}");
  }
  assert!(AnnMode::Auto.wanted(ann::ANN_MIN_ROWS) && !AnnMode::Auto.wanted(ann::ANN_MIN_ROWS - 1));
  assert!(!AnnMode::Off.wanted(usize::MAX) && AnnMode::On.wanted(1));
  // Forced on without a built index: exact results and a diagnostic.
  let none = VectorManifest { ann: None, ..vm.clone() };
  let idx = VectorIndex::open_with(t.path(), &none, &live, AnnMode::On).unwrap();
  assert!(idx.ann_diagnostic().unwrap().contains("no ANN index"));
  assert_eq!(idx.search(q, 10), exact);
}

#[test]
fn a_corrupt_truncated_or_mismatched_file_falls_back_to_the_exact_scan() {
  let t = tempfile::tempdir().unwrap();
  let vm = store(t.path(), &clustered(9, 800, 8));
  let live: HashSet<u64> = (1..=800).collect();
  let qs = queries(23, 5);
  let exact: Vec<_> = {
    let idx = VectorIndex::open_with(t.path(), &vm, &live, AnnMode::Off).unwrap();
    qs.iter().map(|q| idx.search_with(q, 10, false)).collect()
  };
  let bytes = std::fs::read(t.path().join("ann-1.ann")).unwrap();
  let r = vm.ann.clone().unwrap();
  let mut flipped = bytes.clone();
  let mid = flipped.len() / 2 + 7;
  flipped[mid] ^= 0x5a;
  let mut bad_header = bytes.clone();
  bad_header[0] = b'X';
  let cases: Vec<(&str, Vec<u8>, &str)> = vec![
    ("ann-2.ann", flipped, "checksum"),
    ("ann-3.ann", bytes[..bytes.len() - 1000].to_vec(), "truncated"),
    ("ann-4.ann", bytes[..100].to_vec(), "bad header"),
    ("ann-5.ann", bad_header, "bad header"),
    ("ann-6.ann", Vec::new(), "bad header"),
  ];
  for (file, data, why) in cases {
    std::fs::write(t.path().join(file), data).unwrap();
    let vm = VectorManifest { ann: Some(AnnRef { file: file.into(), ..r.clone() }), ..vm.clone() };
    let idx = VectorIndex::open_with(t.path(), &vm, &live, AnnMode::On).unwrap();
    let d = idx.ann_diagnostic().unwrap_or_default();
    assert!(d.contains(why) && d.contains("searching exactly"), "{file}: {d:?}");
    assert_eq!(idx.search_ann(&qs[0], 10), None);
    for (q, e) in qs.iter().zip(&exact) {
      assert_eq!(&idx.search(q, 10), e, "{file}");
    }
  }
  // Missing file, a name outside the writer's pattern, another model, a row-count mismatch.
  let other = [
    (AnnRef { file: "ann-9.ann".into(), ..r.clone() }, "m", "ann-9.ann"),
    (AnnRef { file: "../ann-1.ann".into(), ..r.clone() }, "m", "not an ANN file"),
    (r.clone(), "other-model", "built for m"),
    (AnnRef { rows: 5, ..r.clone() }, "m", "the commit lists 5"),
  ];
  for (aref, model, why) in other {
    let vm = VectorManifest { ann: Some(aref), model: model.into(), ..vm.clone() };
    let idx = VectorIndex::open_with(t.path(), &vm, &live, AnnMode::On).unwrap();
    let d = idx.ann_diagnostic().unwrap_or_default();
    assert!(d.contains(why), "{why}: {d:?}");
    assert_eq!(idx.search(&qs[0], 10), exact[0]);
  }
}
