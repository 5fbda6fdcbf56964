// `formatRecallContext`: the automatic-recall block the extension injects as a hidden tail
// message (pi-contract §5.3). Written from the contract's rules; the output must stay
// byte-for-byte what the extension renders today, because prompts and tests depend on it.
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
