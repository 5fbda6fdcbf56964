// No committed file names a path of the machine it was written on (the shared benchmark data is
// `../shared/...`, relative to the repository): every git-tracked text file is scanned.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

// Not from helpers.mjs: this test needs no built addon.
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

// A home or work directory spelled from the filesystem root (Unix, macOS, Windows). Scratch
// directories such as /tmp in example commands are not machine paths.
const MACHINE_PATH = /(?:^|[\s`'"(=:,[])(?:\/(?:work|home|root|Users|mnt|srv)\/[\w.-]|[A-Za-z]:\\Users\\)/

function machinePaths(text) {
  const hits = []
  text.split('\n').forEach((line, i) => {
    if (MACHINE_PATH.test(line)) hits.push(`${i + 1}: ${line.trim().slice(0, 160)}`)
  })
  return hits
}

test('the pattern finds absolute machine paths and nothing else', () => {
  assert.equal(machinePaths('- Set: /work/shared/bench/scifact (5183 pages)').length, 1)
  assert.equal(machinePaths('`target/release/x bench /home/ann/data`').length, 1)
  assert.equal(machinePaths('see C:\\Users\\ann\\vault').length, 1)
  assert.equal(machinePaths('bench ../shared/bench/scifact --work /tmp/q').length, 0)
  assert.equal(machinePaths('crates/llm-wiki-core/src/work/x.rs and https://example.org/home/x').length, 0)
})

test('no git-tracked text file contains an absolute machine path', () => {
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: repoRoot, encoding: 'utf8' }).split('\0').filter(Boolean)
  assert.ok(files.length > 50, `git ls-files listed ${files.length} files`)
  const offenders = []
  for (const f of files) {
    if (f === '__test__/repository.test.mjs') continue // the examples above
    const abs = path.join(repoRoot, f)
    let buf
    try {
      // A tracked symlink is checked by its target: an absolute one points into this machine.
      if (fs.lstatSync(abs).isSymbolicLink()) {
        const target = fs.readlinkSync(abs)
        if (path.isAbsolute(target)) offenders.push(`${f}: symlink to ${target}`)
        continue
      }
      buf = fs.readFileSync(abs)
    } catch {
      continue // deleted in the working tree
    }
    if (buf.includes(0)) continue // binary
    for (const hit of machinePaths(buf.toString('utf8'))) offenders.push(`${f}:${hit}`)
  }
  assert.deepEqual(offenders, [])
})
