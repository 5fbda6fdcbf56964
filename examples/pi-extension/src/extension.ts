// The pi-llm-wiki extension's retrieval call sites (pi-contract §5.3, §3.1, §4.2) implemented on
// llm-wiki-retrieval: Pi `wiki_recall` (explicit), the automatic `before_agent_start` recall,
// the MCP `recallOperation`, Pi `wiki_reindex` and `wiki_status`. Automatic recall injects
// `recallMemory` bundles (card + evidence + competing claims) when they fit the automatic
// budget, the contract's links-first block otherwise, and nothing when recall finds nothing. Each function takes what the
// host passes (tool params, `ctx.cwd`, the task config) and returns the host's result shape.
import { existsSync } from 'node:fs'
import { join } from 'node:path'

import engine from 'llm-wiki-retrieval'
import type {
  IndexStatus,
  MemoryBundle,
  RecallDiagnostic,
  RecallPolicy,
  RecallResult,
  ReindexProgressEvent,
  VaultPaths,
  WikiReindexInput,
  WikiReindexResult,
} from 'llm-wiki-retrieval'

import { noteDelivered } from './feedback.js'
import {
  DEFAULT_RECALL_BUDGET_CHARS,
  DEFAULT_RECALL_LINKS_THRESHOLD,
  formatMemoryContext,
  formatRecallContext,
  linkSnippet,
  memoryBlockOverhead,
  shouldUseLinksFirst,
} from './format.js'

/** The subset of the extension's TaskConfig these call sites read. */
export interface TaskConfig {
  retrievalMode?: 'lexical' | 'hybrid' | 'adaptive' | 'quality'
  /** Page count above which explicit `wiki_recall` renders links first (default 50). */
  recallLinksThreshold?: number
  recallSkillInlineMax?: number
  /**
   * Characters the automatic block may take (default 8,000, the spec's automatic budget). An
   * example-only knob (the spec keeps the budget a constant); tests use it for budget edges.
   */
  recallBudgetChars?: number
  /** Automatic recall may use the personal vault when no project vault applies (default true on pi). */
  personalVaultIsAmbient?: boolean
  /** The spec's `recallFeedback` (default true): false turns off implicit feedback capture only. */
  recallFeedback?: boolean
  /**
   * Characters all automatic injections of one session may take together (default 24,000 =
   * three full automatic blocks). Example-only knob, like recallBudgetChars.
   */
  recallSessionBudgetChars?: number
}

export const DEFAULT_SESSION_BUDGET_CHARS = 24_000

export interface ToolContext {
  cwd: string
  config?: TaskConfig
  /**
   * Host session id. With one, recall is session-aware (results join the engine's session
   * ledger; automatic recall skips prompts that are not recall-shaped, does not re-inject an
   * unchanged page, and shares the session budget) and feedback is recorded.
   */
  sessionId?: string
}

function sessionOption(ctx: ToolContext) {
  if (!ctx.sessionId) return {}
  const budgetChars = Math.max(0, Math.floor(ctx.config?.recallSessionBudgetChars ?? DEFAULT_SESSION_BUDGET_CHARS))
  return { session: { id: ctx.sessionId, budgetChars } }
}

/** Pi's tool result shape. */
export interface ToolResult {
  content: Array<{ type: 'text'; text: string }>
  details: Record<string, unknown>
  isError?: boolean
}

export const EXPLICIT_DEFAULT_RESULTS = 5
export const EXPLICIT_MAX_RESULTS = 10

/** Explicit recall (Pi and MCP `wiki_recall`). */
export function explicitPolicy(maxResults?: number): RecallPolicy {
  return {
    includePersonal: true,
    minScore: 0.25,
    maxPerVault: 10,
    maxResults: Math.min(maxResults ?? EXPLICIT_DEFAULT_RESULTS, EXPLICIT_MAX_RESULTS),
  }
}

/** Automatic recall (`before_agent_start`). */
export const AUTOMATIC_POLICY: Readonly<RecallPolicy> = Object.freeze({
  includePersonal: false,
  minScore: 0.5,
  maxPerVault: 10,
  maxResults: 3,
})

function hasVault(paths: VaultPaths): boolean {
  return existsSync(join(paths.dotWiki ?? join(paths.root, '.llm-wiki'), 'config.json'))
}

function text(t: string, details: Record<string, unknown>, isError = false): ToolResult {
  return isError ? { content: [{ type: 'text', text: t }], details, isError } : { content: [{ type: 'text', text: t }], details }
}

function recallConfig(config?: TaskConfig) {
  return config?.retrievalMode ? { retrievalMode: config.retrievalMode } : {}
}

/** Pages recall searches (the index's document count; plus the personal vault when included). */
export async function vaultPageCount(paths: VaultPaths, includePersonal: boolean): Promise<number> {
  const count = async (p: VaultPaths) => (hasVault(p) ? (await engine.readIndexStatus(p, { checkPages: false })).totalDocuments : 0)
  let n = await count(paths)
  const personal = engine.personalVaultPaths()
  if (includePersonal && personal.root !== paths.root) n += await count(personal)
  return n
}

// --- Pi wiki_recall (explicit) -----------------------------------------------------------------

export interface WikiRecallParams {
  query: string
  max_results?: number
}

export async function wikiRecall(params: WikiRecallParams, ctx: ToolContext): Promise<ToolResult> {
  const paths = engine.resolveVaultPaths(ctx.cwd)
  if (!hasVault(paths)) {
    return text('No wiki vault found at this location. Initialize one with wiki_bootstrap first.', { error: 'no_vault' }, true)
  }
  const response = await engine.recallWiki(paths, params.query, {
    policy: explicitPolicy(params.max_results),
    config: recallConfig(ctx.config),
    ...(ctx.sessionId ? { session: { id: ctx.sessionId } } : {}),
  })
  const { results, diagnostics } = response
  // The tool result is what delivers them: the session's shown set (judgeable) from here on.
  await noteDelivered(paths, results.map((r) => ({ vaultId: r.vaultId, pageId: r.id, path: r.path })), ctx)
  const diagnosticText = diagnostics.length ? `\n\nDiagnostics: ${diagnostics.map((d) => d.code).join(', ')}` : ''
  if (results.length === 0) {
    return text(
      `No wiki pages found matching "${params.query}". The wiki is empty \u2014 use wiki_retro to start building knowledge.${diagnosticText}`,
      { query: params.query, matches: [], diagnostics },
    )
  }
  const layerTag = results.some((r) => r.vaultLabel) ? ' (personal + project)' : ''
  const vaultTag = (r: RecallResult) => (r.vaultLabel ? ` ${r.vaultLabel}` : '')
  const threshold = ctx.config?.recallLinksThreshold ?? DEFAULT_RECALL_LINKS_THRESHOLD
  const details = { query: params.query, matches: results, diagnostics, retrievalMode: response.mode }

  if (shouldUseLinksFirst(await vaultPageCount(paths, true), threshold)) {
    const links = results.map((r, i) => {
      const snippet = linkSnippet(r.preview)
      return `${i + 1}. [[${r.id}]] \u2014 ${r.title} (${r.type}, score ${r.score.toFixed(1)})${vaultTag(r)}\n   Path: ${r.path}${snippet ? ` \u2014 ${snippet}` : ''}`
    })
    const body = [
      `Found ${results.length} wiki page(s) matching "${params.query}"${layerTag} (two-stage recall \u2014 ranked links, expand on demand):`,
      '',
      links.join('\n'),
      '',
      'Call `read` on the path(s) you need to pull full content.',
    ].join('\n')
    return text(body + diagnosticText, { ...details, mode: 'links' })
  }
  const blocks = results.map((r) => `## [[${r.id}]] \u2014 ${r.title}${vaultTag(r)}\nType: ${r.type}\nPath: ${r.path}\n\n${r.preview}`)
  return text(`Found ${results.length} wiki page(s) matching "${params.query}"${layerTag}:\n\n${blocks.join('\n\n---\n\n')}${diagnosticText}`, {
    ...details,
    mode: 'preview',
  })
}

// --- automatic before_agent_start ------------------------------------------------------------

export interface RecallContextMessage {
  customType: 'wiki-recall-context'
  content: string
  display: false
}

/** Whether the wiki applies to `cwd`: a project vault exists there, or the personal vault is ambient. */
export function wikiAppliesTo(cwd: string, config?: TaskConfig): boolean {
  const paths = engine.resolveVaultPaths(cwd)
  const personal = engine.personalVaultPaths()
  const project = paths.root !== personal.root && hasVault(paths)
  return project || (config?.personalVaultIsAmbient ?? true)
}

/** What automatic recall decided for a prompt. */
export interface AutomaticRecall {
  /** The block to inject; '' = inject nothing. */
  content: string
  /** `memory`: bundles fit the budget; `links`: they did not, links-first; `none`: nothing reliable. */
  rendering: 'memory' | 'links' | 'none'
  bundles: MemoryBundle[]
  diagnostics: RecallDiagnostic[]
}

const NOTHING: AutomaticRecall = Object.freeze({ content: '', rendering: 'none', bundles: [], diagnostics: [] }) as AutomaticRecall

/**
 * Automatic recall for `prompt` (precision first: the automatic policy's 0.50 floor; no
 * result, no block). Memory bundles rendered by the engine within the budget minus the block's
 * header and footer; when even the top bundle does not fit (`memory_budget_too_small`), the
 * contract's links-first block over the same automatic recall, skill bodies not inlined.
 */
export async function automaticRecall(prompt: string, ctx: ToolContext): Promise<AutomaticRecall> {
  if (!prompt.trim() || !wikiAppliesTo(ctx.cwd, ctx.config)) return { ...NOTHING }
  const paths = engine.resolveVaultPaths(ctx.cwd)
  if (!hasVault(paths)) return { ...NOTHING }
  const wikiDir = paths.wiki ?? join(paths.dotWiki ?? join(paths.root, '.llm-wiki'), 'wiki')
  const budget = Math.max(0, Math.floor(ctx.config?.recallBudgetChars ?? DEFAULT_RECALL_BUDGET_CHARS))
  const config = recallConfig(ctx.config)
  const session = sessionOption(ctx)
  const memory = await engine.recallMemory(paths, prompt, {
    policy: { ...AUTOMATIC_POLICY },
    config,
    budgetChars: Math.max(0, budget - memoryBlockOverhead({ wikiDir })),
    ...session,
  })
  const content = formatMemoryContext(memory, { wikiDir })
  if (content) {
    const items = memory.bundles.flatMap((b) => [...(b.card ? [b.card] : []), ...b.evidence, ...b.conflicts])
    await noteDelivered(paths, items.map((i) => ({ vaultId: i.vaultId, pageId: i.pageId, path: i.path })), ctx)
    return { content, rendering: 'memory', bundles: memory.bundles, diagnostics: memory.diagnostics }
  }
  if (!memory.diagnostics.some((d) => d.code === 'memory_budget_too_small')) return { ...NOTHING, diagnostics: memory.diagnostics }
  const { results } = await engine.recallWiki(paths, prompt, { policy: { ...AUTOMATIC_POLICY }, config, ...session })
  const links = formatRecallContext(results, { linksOnly: true, skillInlineMax: 0 })
  if (!links) return { ...NOTHING, diagnostics: memory.diagnostics }
  await noteDelivered(paths, results.map((r) => ({ vaultId: r.vaultId, pageId: r.id, path: r.path })), ctx)
  return { content: links, rendering: 'links', bundles: [], diagnostics: memory.diagnostics }
}

/** The block automatic recall injects for `prompt`; '' when nothing reliable was found. */
export async function automaticRecallContext(prompt: string, ctx: ToolContext): Promise<string> {
  return (await automaticRecall(prompt, ctx)).content
}

/** `before_agent_start` handler: a hidden tail message, or nothing at all. */
export async function beforeAgentStart(event: { prompt: string }, ctx: ToolContext): Promise<{ message: RecallContextMessage } | undefined> {
  const content = await automaticRecallContext(event.prompt, ctx)
  return content ? { message: { customType: 'wiki-recall-context', content, display: false } } : undefined
}

// --- MCP -----------------------------------------------------------------------------------

/** MCP `recallOperation(paths, query, maxResults)`: the same explicit recall, structured. */
export async function recallOperation(
  paths: VaultPaths,
  query: string,
  maxResults: number,
  config?: TaskConfig,
): Promise<{ results: RecallResult[]; diagnostics: RecallDiagnostic[] }> {
  const r = await engine.recallWiki(paths, query, { policy: explicitPolicy(maxResults), config: recallConfig(config) })
  return { results: r.results, diagnostics: r.diagnostics }
}

/** MCP `wiki_recall` tool: vault from `$WIKI_ROOT || cwd`, JSON results plus warning lines. */
export async function mcpWikiRecall(args: { query: string; max_results?: number }, env: { root: string }) {
  const paths = engine.resolveVaultPaths(env.root)
  const { results, diagnostics } = await recallOperation(paths, args.query, Math.min(args.max_results ?? 5, 10))
  const warnings = diagnostics.map((d) => `\u26a0\ufe0f ${d.code}: ${d.message}`)
  return { content: [{ type: 'text' as const, text: [JSON.stringify(results, null, 2), ...warnings].join('\n') }] }
}

// --- wiki_reindex --------------------------------------------------------------------------

const SCOPES = ['changed', 'all'] as const
const COMPONENTS = ['lexical', 'vectors'] as const
const VAULTS = ['active', 'personal', 'project', 'all'] as const

export interface WikiReindexParams {
  scope?: (typeof SCOPES)[number]
  components?: Array<(typeof COMPONENTS)[number]>
  force?: boolean
  vault?: (typeof VAULTS)[number]
}

/** The tool schema's checks (enum scope/vault, components minItems 1 + uniqueItems, boolean force). */
export function validateReindexParams(p: Record<string, unknown>): string | null {
  if (p.scope !== undefined && !SCOPES.includes(p.scope as never)) return `scope must be one of ${SCOPES.join(', ')}`
  if (p.vault !== undefined && !VAULTS.includes(p.vault as never)) return `vault must be one of ${VAULTS.join(', ')}`
  if (p.force !== undefined && typeof p.force !== 'boolean') return 'force must be a boolean'
  if (p.components !== undefined) {
    const c = p.components
    if (!Array.isArray(c) || c.length < 1) return 'components must be a non-empty array'
    if (c.some((x) => !COMPONENTS.includes(x as never))) return `components must be among ${COMPONENTS.join(', ')}`
    if (new Set(c).size !== c.length) return 'components must be unique'
  }
  return null
}

export async function wikiReindex(
  params: WikiReindexParams,
  ctx: ToolContext,
  signal?: AbortSignal,
  onUpdate?: (e: ReindexProgressEvent) => void,
): Promise<ToolResult> {
  const invalid = validateReindexParams(params as Record<string, unknown>)
  if (invalid) return text(`Invalid wiki_reindex arguments: ${invalid}`, { error: 'invalid_arguments' }, true)
  const paths = engine.resolveVaultPaths(ctx.cwd)
  if (!hasVault(paths)) return text('No wiki vault found at this location. Initialize one with wiki_bootstrap first.', { error: 'no_vault' }, true)
  const scope = params.scope ?? 'changed'
  const components = params.components ?? ['lexical', 'vectors']
  const vault = params.vault ?? 'active'
  const input: WikiReindexInput = { scope, components, force: params.force ?? false, vault }
  if (signal) input.signal = signal
  if (onUpdate) input.onProgress = onUpdate
  const out: WikiReindexResult = await engine.reindexWiki(paths, input)
  const lines = out.results.map(({ root, label, result: r }) => {
    const d = r.documents
    const issues = [...r.errors, ...r.warnings].map((i) => i.code)
    return (
      `${r.ok ? '\u2705' : '\u274c'} ${label} vault ${root}: ${d.indexed} indexed, ${d.updated} updated, ${d.unchanged} unchanged, ${d.removed} removed; ` +
      `${r.chunks.total} chunks; ${r.vectors.generated} embedded; index ${r.status.state}${issues.length ? ` (${issues.join(', ')})` : ''}`
    )
  })
  const summary = out.results.length ? lines.join('\n') : `No vault matched vault="${vault}".`
  const failed = out.results.some((x) => !x.result.ok)
  return text(`wiki_reindex scope=${scope} components=${JSON.stringify(components)} vault=${vault}\n${summary}`, { scope, components, vault, results: out.results }, failed)
}

// --- wiki_status ----------------------------------------------------------------------------

/** The index lines of Pi `wiki_status` (§4.2); `details.qmd` is the full status. */
export function renderIndexStatus(qmd: IndexStatus): string[] {
  return [
    `QMD index: ${qmd.state}`,
    `QMD documents: ${qmd.totalDocuments} (${qmd.canonicalDocuments} canonical, ${qmd.evidenceDocuments} evidence)`,
    `QMD embeddings pending: ${qmd.needsEmbedding}`,
    `QMD package: ${qmd.qmdVersion}`,
  ]
}

export async function wikiStatus(ctx: ToolContext): Promise<ToolResult> {
  const paths = engine.resolveVaultPaths(ctx.cwd)
  if (!hasVault(paths)) return text('No wiki vault found at this location. Initialize one with wiki_bootstrap first.', { error: 'no_vault' }, true)
  const qmd = await engine.readIndexStatus(paths)
  const repair =
    qmd.state === 'stale' || qmd.state === 'error'
      ? [`Repair: wiki_reindex(scope="changed", components=${JSON.stringify(qmd.repairComponents.length ? qmd.repairComponents : ['lexical'])}, vault="active")`]
      : []
  const issues = qmd.issues.map((i) => `  - ${i.code}: ${i.message}`)
  const lines = ['\ud83d\udcca LLM Wiki Status', '\u2550'.repeat(18), ...renderIndexStatus(qmd), ...repair, ...(issues.length ? ['', '\u26a0\ufe0f Index issues:', ...issues] : [])]
  return text(lines.join('\n'), { qmd })
}
