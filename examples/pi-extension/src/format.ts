// `formatRecallContext`: the recall block rendering of pi-contract §5.3 (links-first and
// previews). Written from the contract's rules; the output must stay byte-for-byte what the
// extension renders today, because prompts and tests depend on it.
// `formatMemoryContext`: the automatic-recall block built from `recallMemory` bundles (spec
// "Context Packing"): the engine's rendered bundles between a header and a footer, the whole
// block within the automatic character budget.
import { existsSync, readFileSync } from 'node:fs'

/** The fields of a recall result the rendering reads (the engine's RecallResult has more). */
export interface RenderableResult {
  id: string
  title: string
  type: string
  preview: string
  path: string
  score: number
  vaultLabel?: string
}

export interface FormatOptions {
  /** Links-first ("two-stage") rendering, used above the vault-size threshold. */
  linksOnly?: boolean
  /** Characters of a skill/case body inlined; 0 disables inlining. Default 1600. */
  skillInlineMax?: number
}

export const DEFAULT_RECALL_SKILL_INLINE_MAX = 1600
export const DEFAULT_RECALL_LINKS_THRESHOLD = 50
const LINK_SNIPPET_CHARS = 80
const PREVIEW_CHARS = 120

const SKILL_NUDGE =
  '\u26a0\ufe0f A distilled skill/case below matches this task \u2014 read and APPLY it BEFORE experimenting on your own.'

/** Links-first when the vault holds strictly more pages than the threshold. */
export function shouldUseLinksFirst(pageCount: number, threshold = DEFAULT_RECALL_LINKS_THRESHOLD): boolean {
  return pageCount > threshold
}

export function isSkillOrCase(r: Pick<RenderableResult, 'id' | 'type'>): boolean {
  return r.type === 'skill' || r.type === 'case' || r.id.startsWith('skills/') || r.id.startsWith('cases/')
}

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}\u2026` : text
}

/** The preview on one line (whitespace runs collapsed), cut at 80 characters. */
export function linkSnippet(preview: string): string {
  return cut(preview.replace(/\s+/g, ' ').trim(), LINK_SNIPPET_CHARS)
}

/**
 * Body of a skill/case page to inline, or null: frontmatter stripped (CRLF normalized first),
 * trimmed, cut at `max` characters with a pointer to the full page. `max <= 0` reads nothing.
 */
function skillBody(r: RenderableResult, max: number): string | null {
  if (max <= 0 || !isSkillOrCase(r) || !r.path || !existsSync(r.path)) return null
  const text = readFileSync(r.path, 'utf8').replace(/\r\n/g, '\n')
  const body = text.replace(/^---\n[\s\S]*?\n---\n/, '').trim()
  if (!body) return null
  return body.length > max ? `${body.slice(0, max)}\n\u2026(truncated \u2014 \`read\` the path above for the full page)` : body
}

/** A backtick fence longer than every backtick run in `body` (at least three). */
export function fenceFor(body: string): string {
  const longest = Math.max(0, ...(body.match(/`+/g) ?? []).map((run) => run.length))
  return '`'.repeat(Math.max(3, longest + 1))
}

function fenced(body: string, indent: string): string[] {
  const fence = fenceFor(body)
  return ['', indent + fence, ...body.split('\n').map((line) => indent + line), indent + fence]
}

export function formatRecallContext(results: readonly RenderableResult[], opts: FormatOptions = {}): string {
  if (results.length === 0) return ''
  const inlineMax = opts.skillInlineMax ?? DEFAULT_RECALL_SKILL_INLINE_MAX
  const layered = results.some((r) => r.vaultLabel) ? ' (personal + project)' : ''
  const nudge = results.some(isSkillOrCase) ? ['', SKILL_NUDGE] : []
  const tag = (r: RenderableResult) => (r.vaultLabel ? ` ${r.vaultLabel}` : '')

  if (opts.linksOnly) {
    const out = [
      '## Relevant Wiki Knowledge (links-first)',
      ...nudge,
      '',
      `_${results.length} page(s) matched your query${layered}, ranked. Two-stage recall: links only \u2014 open the ones you need to read their full content._`,
      '',
    ]
    results.forEach((r, i) => {
      const snippet = linkSnippet(r.preview)
      out.push(`${i + 1}. **[[${r.id}]]** \u2014 *${r.type}* \u2014 score ${r.score.toFixed(1)}${tag(r)} \u2014 ${r.title}${snippet ? ` \u2014 ${snippet}` : ''}`)
      if (r.path) out.push(`   \u21b3 \`read ${r.path}\``)
      const body = skillBody(r, inlineMax)
      if (body) out.push(...fenced(body, '   '))
    })
    out.push('', 'Call `read` on the exact path shown under each link to pull its full content. Add new findings via wiki_ensure_page or wiki_retro.', '')
    return out.join('\n')
  }

  const out = ['## Relevant Wiki Knowledge', ...nudge, '', `_${results.length} page(s) matched your query${layered}._`, '']
  for (const r of results) {
    out.push(`- **[[${r.id}]]** \u2014 *${r.type}* \u2014 ${r.title}${tag(r)}`)
    const body = skillBody(r, inlineMax)
    if (body) {
      if (r.path) out.push(`  \u21b3 \`read ${r.path}\``)
      out.push(...fenced(body, '  '))
    } else if (r.preview) {
      out.push(`  ${cut(r.preview, PREVIEW_CHARS)}`)
    }
    out.push('')
  }
  out.push('Use `read` to view full pages. Add new findings via wiki_ensure_page or wiki_retro.', '')
  return out.join('\n')
}

/** The automatic context budget in characters (spec "Context Packing": 8,000). */
export const DEFAULT_RECALL_BUDGET_CHARS = 8000

/** Characters as the engine counts them (Unicode scalar values, not UTF-16 units). */
export function charCount(s: string): number {
  let n = 0
  for (const _ of s) n++
  return n
}

/** What the memory block reads of a `recallMemory` response (`MemoryResponse` has more). */
export interface RenderableMemory {
  bundles: ReadonlyArray<{
    card?: { pageId: string; type: string; vaultLabel?: string }
    evidence: ReadonlyArray<{ vaultLabel?: string }>
    conflicts: ReadonlyArray<{ vaultLabel?: string }>
  }>
  /** The engine's rendering of `bundles` (within the budget it was given). */
  context: string
}

export interface MemoryFormatOptions {
  /** Directory of the vault's pages (`VaultPaths.wiki`): page `<id>` is `<wikiDir>/<id>.md`. */
  wikiDir: string
}

function memoryHeader(count: number, layered: boolean, skill: boolean): string {
  return [
    '## Relevant Wiki Knowledge (memory)',
    ...(skill ? ['', SKILL_NUDGE] : []),
    '',
    `_${count} memory bundle(s) matched your query${layered ? ' (personal + project)' : ''}: each card comes with its evidence and competing claims._`,
    '',
    '',
  ].join('\n')
}

function memoryFooter(opts: MemoryFormatOptions): string {
  return `\nPage files: \`read ${opts.wikiDir}/<page id>.md\` (line ranges above). Add new findings via wiki_ensure_page or wiki_retro.\n`
}

/**
 * Characters the header and footer of `formatMemoryContext` may take (worst case: skill nudge,
 * layered label, three-digit count): the automatic path asks the engine for bundles within the
 * budget minus this, so the whole block stays within the budget.
 */
export function memoryBlockOverhead(opts: MemoryFormatOptions): number {
  return charCount(memoryHeader(100, true, true)) + charCount(memoryFooter(opts))
}

/** The memory block for `memory`; '' when it holds no bundle. */
export function formatMemoryContext(memory: RenderableMemory, opts: MemoryFormatOptions): string {
  if (memory.bundles.length === 0 || !memory.context) return ''
  const items = memory.bundles.flatMap((b) => [...(b.card ? [b.card] : []), ...b.evidence, ...b.conflicts])
  const layered = items.some((i) => i.vaultLabel)
  const skill = memory.bundles.some((b) => b.card !== undefined && isSkillOrCase({ id: b.card.pageId, type: b.card.type }))
  const context = memory.context.endsWith('\n') ? memory.context : `${memory.context}\n`
  return memoryHeader(memory.bundles.length, layered, skill) + context + memoryFooter(opts)
}

/** A warning or diagnostic the engine attached to a result (`{ code, message }`). */
export interface EngineNote {
  code: string
  message: string
}

/** What the agent (and through it the user) should know about a note, by code. */
const NOTE_HINTS: Record<string, string> = {
  resolution_feedback_not_recorded:
    'The decision is saved, but its ranking signal (conflict_selected) was not recorded; wiki_rebuild_meta replays it from the resolution page.',
  resolution_index_stale: 'The search index does not include the decision yet; run wiki_reindex.',
  resolution_index_skipped: 'The search index was not updated; run wiki_reindex.',
  qmd_index_busy: 'Another reindex was running.',
  correction_saved_feedback_pending:
    'The correction page is saved, but its ranking event is pending; wiki_rebuild_meta replays it.',
  feedback_lock_busy: 'The feedback log was busy; this signal was not recorded.',
  feedback_events_corrupt: 'Feedback adjustments are disabled until meta/events.jsonl is repaired (nothing was rewritten).',
  feedback_events_line_skipped: 'Some over-long lines of meta/events.jsonl were skipped.',
}

/**
 * Render the engine's warnings / diagnostics as lines the agent sees (one per code, in order),
 * so a partial success is never presented as a plain success. Empty string when there are none.
 */
export function formatEngineNotes(notes: readonly EngineNote[]): string {
  const seen = new Set<string>()
  const lines: string[] = []
  for (const n of notes) {
    if (seen.has(n.code)) continue
    seen.add(n.code)
    const hint = NOTE_HINTS[n.code]
    lines.push(hint ? `⚠ ${hint} (${n.code}: ${n.message})` : `⚠ ${n.code}: ${n.message}`)
  }
  return lines.join('\n')
}
