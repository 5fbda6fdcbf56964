// `npm run test:example`: the pi-extension drop-in example (examples/pi-extension) against the
// addon built in this checkout: install its dev tools (typescript, @types/node; the addon itself
// is linked with file:../..), compile it with tsc (strict), run its node:test suite on vaults it
// writes or keeps in examples/pi-extension/test/vault (no shared data needed).
import { existsSync } from 'node:fs'
import { join } from 'node:path'

import { ensureBuilt, ensureNodeModules, root, run } from './setup.mjs'

const example = join(root, 'examples', 'pi-extension')
ensureNodeModules()
ensureBuilt({ profile: 'ci' })
if (!existsSync(join(example, 'node_modules', 'typescript'))) {
  run('npm', ['install', '--no-audit', '--no-fund'], { cwd: example })
}
run(process.execPath, [join(example, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', example])
run(process.execPath, ['--test', '--test-concurrency=1', 'dist/test/'], { cwd: example })
