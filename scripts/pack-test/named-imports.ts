// Pack-test probe: ESM named imports, what most TypeScript ESM code writes; tsc accepts them
// because index.d.ts declares named exports, so they must also work at run time.
import { addOnnxRuntimeCandidates, configure, downloadModel, engineInfo, modelStatus, personalVaultPaths, readIndexStatus, recallWiki, reindexWiki, resolveVaultPaths, runCli } from 'llm-wiki-retrieval'

const fns = { addOnnxRuntimeCandidates, configure, downloadModel, engineInfo, modelStatus, personalVaultPaths, readIndexStatus, recallWiki, reindexWiki, resolveVaultPaths, runCli }
const missing = Object.entries(fns).filter(([, f]) => typeof f !== 'function').map(([k]) => k)
if (missing.length) throw new Error('not functions: ' + missing.join(', '))
console.log('named imports ok, engine ' + engineInfo().version)
