// Recall feedback in the example layer (spec "Feedback" → instrumentation): the session's
// active-turn record of what recall delivered, the `opened` (tool-call hook: a `read` of a
// shown page's path), `cited` / `shown_only` (turn-end hook: the assistant's text names the
// page's wikilink or id, or neither happened) hooks, and the `wiki_recall_feedback` tool for
// explicit `relevant` / `irrelevant` / `corrected` judgments. The engine's session ledger holds
// the shown set and the query hash; this layer only names the session and the pair.
import { resolve } from 'node:path'

import engine from 'llm-wiki-retrieval'
import type { FeedbackOutcome, VaultPaths } from 'llm-wiki-retrieval'

import { formatEngineNotes } from './format.js'

/** The subset of TaskConfig feedback reads. */
export interface FeedbackTaskConfig {
  /** The spec's `recallFeedback` (default true): false turns off shown/opened/cited/shown_only capture only. */
  recallFeedback?: boolean
}

export interface FeedbackContext {
  cwd: string
  /** Host session id; without one, nothing is recorded. */
  sessionId?: string
  config?: FeedbackTaskConfig
}

/** A result delivered in the active turn. */
export interface ShownInTurn {
  vaultId: string
  pageId: string
  /** Absolute path of the page file (what a `read` names). */
  path: string
  opened: boolean
}

const turns = new Map<string, ShownInTurn[]>()

function feedbackConfig(config?: FeedbackTaskConfig) {
  return { recallFeedback: config?.recallFeedback ?? true }
}

/**
 * Recall delivered `items` in the session's active turn: confirm them to the engine's ledger
 * (which appends `shown` events unless recallFeedback is false) and remember them for the hooks.
 */
export async function noteDelivered(
  paths: VaultPaths,
  items: Array<{ vaultId: string; pageId: string; path: string }>,
  ctx: FeedbackContext,
): Promise<FeedbackOutcome | undefined> {
  if (!ctx.sessionId || items.length === 0) return undefined
  const turn = turns.get(ctx.sessionId) ?? []
  for (const i of items) {
    if (!turn.some((t) => t.vaultId === i.vaultId && t.pageId === i.pageId)) turn.push({ ...i, opened: false })
  }
  turns.set(ctx.sessionId, turn)
  return engine.confirmRecallShown(paths, { sessionId: ctx.sessionId, config: feedbackConfig(ctx.config) })
}

/** The results delivered in the session's active turn. */
export function shownInTurn(sessionId: string): readonly ShownInTurn[] {
  return turns.get(sessionId) ?? []
}

async function record(paths: VaultPaths, ctx: FeedbackContext, t: ShownInTurn, action: 'opened' | 'cited' | 'shown_only') {
  return engine.recordRecallFeedback(paths, {
    sessionId: ctx.sessionId!,
    vaultId: t.vaultId,
    pageId: t.pageId,
    action,
    config: feedbackConfig(ctx.config),
  })
}

/** Tool-call hook: a `read` whose path resolves to a page shown in the active turn emits `opened` (once). */
export async function onToolCall(event: { toolName: string; input: Record<string, unknown> }, ctx: FeedbackContext): Promise<FeedbackOutcome[]> {
  if (!ctx.sessionId || event.toolName !== 'read') return []
  const raw = event.input.path ?? event.input.file_path
  if (typeof raw !== 'string' || !raw) return []
  const target = resolve(ctx.cwd, raw)
  const paths = engine.resolveVaultPaths(ctx.cwd)
  const out: FeedbackOutcome[] = []
  for (const t of turns.get(ctx.sessionId) ?? []) {
    if (!t.opened && resolve(t.path) === target) {
      t.opened = true
      out.push(await record(paths, ctx, t, 'opened'))
    }
  }
  return out
}

function cites(text: string, pageId: string): boolean {
  return text.includes(`[[${pageId}]]`) || text.includes(`[[${pageId}|`) || new RegExp(`(^|[^\\w/-])${pageId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(\\.md)?($|[^\\w/-])`).test(text)
}

/**
 * Turn-end hook: `cited` for each shown page whose wikilink or id the assistant's output names,
 * `shown_only` for each neither opened nor cited. Ends the turn's record.
 */
export async function onTurnEnd(event: { text: string }, ctx: FeedbackContext): Promise<Array<{ pageId: string; action: string; outcome: FeedbackOutcome }>> {
  if (!ctx.sessionId) return []
  const shown = turns.get(ctx.sessionId) ?? []
  turns.delete(ctx.sessionId)
  const paths = engine.resolveVaultPaths(ctx.cwd)
  const out: Array<{ pageId: string; action: string; outcome: FeedbackOutcome }> = []
  for (const t of shown) {
    const action = cites(event.text, t.pageId) ? 'cited' : t.opened ? undefined : 'shown_only'
    if (action) out.push({ pageId: t.pageId, action, outcome: await record(paths, ctx, t, action) })
  }
  return out
}

/** Session end: forget the turn record and the engine's ledger of the session. */
export function onSessionEnd(ctx: FeedbackContext): void {
  if (!ctx.sessionId) return
  turns.delete(ctx.sessionId)
  engine.endRecallSession(ctx.sessionId)
}

// --- wiki_recall_feedback ------------------------------------------------------------------

const JUDGMENTS = ['relevant', 'irrelevant', 'corrected'] as const

export interface WikiRecallFeedbackParams {
  vault_id: string
  page_id: string
  judgment: (typeof JUDGMENTS)[number]
  correction?: string
}

export interface FeedbackToolResult {
  content: Array<{ type: 'text'; text: string }>
  details: Record<string, unknown>
  isError?: boolean
}

function result(text: string, details: Record<string, unknown>, isError = false): FeedbackToolResult {
  return isError ? { content: [{ type: 'text', text }], details, isError } : { content: [{ type: 'text', text }], details }
}

/**
 * What a feedback outcome means, for the agent: `recorded`, or the partial outcomes the engine
 * reports (`correction_saved_feedback_pending`, `dropped`, `disabled`) with its diagnostics.
 */
export function describeFeedbackOutcome(judgment: string, pageId: string, out: FeedbackOutcome): string {
  const saved = out.observation ? ` Correction saved as [[${out.observation}]].` : ''
  const head =
    out.status === 'recorded'
      ? `Recorded ${judgment} for [[${pageId}]].${saved}`
      : out.status === 'correction_saved_feedback_pending'
        ? `Saved the correction for [[${pageId}]] as [[${out.observation}]], but its ranking event was not recorded.`
        : `Did not record ${judgment} for [[${pageId}]] (${out.status}).`
  const notes = formatEngineNotes([
    ...(out.status === 'correction_saved_feedback_pending' ? [{ code: out.status, message: 'rebuildFeedback replays the observation' }] : []),
    ...out.diagnostics,
  ])
  return notes ? `${head}\n${notes}` : head
}

/** The tool schema's checks. */
export function validateFeedbackParams(p: Record<string, unknown>): string | null {
  if (typeof p.vault_id !== 'string' || !p.vault_id) return 'vault_id must be a non-empty string'
  if (typeof p.page_id !== 'string' || !p.page_id) return 'page_id must be a non-empty string'
  if (!JUDGMENTS.includes(p.judgment as never)) return `judgment must be one of ${JUDGMENTS.join(', ')}`
  if (p.judgment === 'corrected' && (typeof p.correction !== 'string' || !p.correction.trim())) return 'correction is required for corrected'
  if (p.judgment !== 'corrected' && p.correction !== undefined) return 'correction is only accepted with corrected'
  return null
}

/**
 * `wiki_recall_feedback(vault_id, page_id, judgment, correction?)`: an explicit user judgment
 * of a result already shown in this session. The engine takes the query hash from its session
 * ledger; `corrected` first saves a correction observation page, then the event.
 */
export async function wikiRecallFeedback(params: WikiRecallFeedbackParams, ctx: FeedbackContext): Promise<FeedbackToolResult> {
  const invalid = validateFeedbackParams(params as unknown as Record<string, unknown>)
  if (invalid) return result(`Invalid wiki_recall_feedback arguments: ${invalid}`, { error: 'invalid_arguments' }, true)
  if (!ctx.sessionId) return result('wiki_recall_feedback needs an active session.', { error: 'no_session' }, true)
  const paths = engine.resolveVaultPaths(ctx.cwd)
  try {
    const out = await engine.recordRecallFeedback(paths, {
      sessionId: ctx.sessionId,
      vaultId: params.vault_id,
      pageId: params.page_id,
      action: params.judgment,
      ...(params.correction !== undefined ? { correction: params.correction } : {}),
      config: feedbackConfig(ctx.config),
    })
    return result(describeFeedbackOutcome(params.judgment, params.page_id, out), { ...out })
  } catch (e) {
    const err = e as { code?: string; message?: string }
    const hint = err.code === 'feedback_not_shown' ? ' Only results shown in this session can be judged.' : ''
    return result(`wiki_recall_feedback failed (${err.code ?? 'error'}): ${err.message ?? String(e)}.${hint}`, { error: err.code ?? 'error' }, true)
  }
}
