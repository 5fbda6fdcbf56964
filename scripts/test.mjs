// `npm test`: every test of the project, in order — formatting and lints, the Rust core's
// tests, a build of the addon (checking that the generated index.d.ts / binding.js are
// committed unchanged), then the JavaScript tests against the built addon.
import { ensureBuilt, ensureModels, ensureNodeModules, gitDiffClean, root, run } from './setup.mjs'

const quick = process.argv.includes('--quick') // skip fmt/clippy (local iteration)

ensureNodeModules()
ensureModels({ required: process.env.CI === 'true' })
if (!quick) {
  run('cargo', ['fmt', '--all', '--', '--check'])
  run('cargo', ['clippy', '--workspace', '--all-targets', '--profile', 'ci', '--', '-D', 'warnings'])
}
run('cargo', ['test', '-p', 'llm-wiki-core', '--features', 'cli', '--profile', 'ci'])
ensureBuilt({ profile: 'ci', force: true })
gitDiffClean(['index.d.ts', 'binding.js'])
run('node', ['--test', '--test-concurrency=1', '__test__/'])
// The pi-extension drop-in example and the install-from-tarball test (Node 20 and 22, no Rust
// toolchain on PATH, onnxruntime-node as the only runtime library).
run('node', ['scripts/test-example.mjs'])
run('node', ['scripts/pack-test.mjs'], { env: { ...process.env, LLM_WIKI_MODELS_DIR: process.env.LLM_WIKI_MODELS_DIR || `${root}/.models` } })
