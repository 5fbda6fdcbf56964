//! Rebuild when the napi CLI asks for this crate's TypeScript declarations again (feature
//! `napi`): `napi build` sets `NAPI_FORCE_BUILD_LLM_WIKI_CORE` when its type-definition folder
//! lacks this crate's file, so a warm build still yields the whole `index.d.ts`.
fn main() {
  println!("cargo::rerun-if-env-changed=NAPI_FORCE_BUILD_LLM_WIKI_CORE");
}
