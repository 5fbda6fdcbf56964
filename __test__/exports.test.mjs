// The package's public surface: every function and constant declared in the generated
// index.d.ts is exported by index.js, under CommonJS and as an ES-module named import (Node only
// sees CommonJS names that index.js spells out literally).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { test } from 'node:test'

import { repoRoot } from './helpers.mjs'

const declared = [...fs.readFileSync(path.join(repoRoot, 'index.d.ts'), 'utf8').matchAll(/^export declare (?:function|const) (\w+)/gm)]
  .map((m) => m[1])
  .sort()

test('index.d.ts declares the API, and no test hook', () => {
  for (const name of ['reindexWiki', 'recallWiki', 'readIndexStatus', 'configure', 'addOnnxRuntimeCandidates', 'downloadModel', 'modelStatus']) {
    assert.ok(declared.includes(name), name)
  }
  assert.ok(!declared.some((name) => /debug|panic|crash/i.test(name)), declared.join())
})

test('every declared export exists in CommonJS and as an ES-module named import', async () => {
  const cjs = createRequire(import.meta.url)(path.join(repoRoot, 'index.js'))
  const esm = await import(path.join(repoRoot, 'index.js'))
  for (const name of declared) {
    assert.notEqual(cjs[name], undefined, `require: ${name}`)
    assert.notEqual(esm[name], undefined, `import { ${name} }`)
  }
  assert.deepEqual(Object.keys(cjs).sort(), declared, 'index.js exports exactly what index.d.ts declares')
})

// napi-rs's names for an argument of the wrong type: no export may report one (issue 43 item 10:
// `recallWiki(paths, 123)` rejected with `err.code === 'StringExpected'`).
const NAPI_ARGUMENT_STATUSES = ['InvalidArg', 'ObjectExpected', 'StringExpected', 'NameExpected', 'FunctionExpected', 'NumberExpected', 'BooleanExpected', 'ArrayExpected', 'BigintExpected', 'DateExpected', 'ArrayBufferExpected']

test('an argument of the wrong type is invalid_argument for every export', async () => {
  const cjs = createRequire(import.meta.url)(path.join(repoRoot, 'index.js'))
  const { addon } = await import('./helpers.mjs')
  const paths = addon.resolveVaultPaths(repoRoot)
  await assert.rejects(cjs.recallWiki(paths, 123), (err) => err.code === 'invalid_argument' && err.napiCode === 'StringExpected')
  assert.throws(() => cjs.recallSkipReason(123), (err) => err.code === 'invalid_argument')
  // Numbers and booleans only: an array or a string could be a valid object or path for some
  // export (an array is an object to napi) and start real work (a download).
  const wrong = [[123, 123, 123], [true, true, true]]
  let typeErrors = 0
  for (const name of declared) {
    const fn = cjs[name]
    if (typeof fn !== 'function' || name === 'runCli' || name === 'engineInfo') continue
    for (const args of wrong) {
      let err
      try {
        const out = fn(...args)
        if (out && typeof out.then === 'function') await out.then(() => {}, (e) => { err = e })
      } catch (e) {
        err = e
      }
      if (!err) continue
      assert.ok(!NAPI_ARGUMENT_STATUSES.includes(err.code), `${name}(${args.map(String).join(', ')}) failed with ${err.code}: ${err.message}`)
      if (err.code === 'invalid_argument') typeErrors++
    }
  }
  assert.ok(typeErrors >= 20, `${typeErrors} argument-type errors seen`)
})
