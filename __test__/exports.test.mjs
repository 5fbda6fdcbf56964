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
