/**
 * The steps of a run as a tree, filled in live from `/stream_events`: each
 * run's name, type and duration, with its input and output on demand.
 */
import { clear, h } from './dom.js';

export interface StreamEvent {
  event: string;
  name: string;
  run_id: string;
  parent_ids?: string[];
  data?: { input?: unknown; output?: unknown; chunk?: unknown; error?: unknown };
}

interface Node {
  id: string;
  name: string;
  type: string;
  started: number;
  ended?: number;
  status: 'running' | 'done' | 'error' | 'stopped';
  /** Its events came, in part, after a reconnect replayed them at once: the time between them says nothing. */
  untimed?: boolean;
  input?: unknown;
  output?: unknown;
  children: Node[];
}

/** Adds a chunk to what came before: strings and arrays concatenate, objects merge key by key, anything else replaces. */
export function mergeChunk(previous: unknown, chunk: unknown): unknown {
  if (previous === undefined) return chunk;
  if (typeof previous === 'string' && typeof chunk === 'string') return previous + chunk;
  if (Array.isArray(previous) && Array.isArray(chunk)) return [...previous, ...chunk];
  if (previous !== null && chunk !== null && typeof previous === 'object' && typeof chunk === 'object' && !Array.isArray(previous) && !Array.isArray(chunk)) {
    const out: Record<string, unknown> = { ...(previous as Record<string, unknown>) };
    for (const [key, value] of Object.entries(chunk as Record<string, unknown>)) out[key] = key in out && key !== 'id' && key !== 'type' ? mergeChunk(out[key], value) : value;
    return out;
  }
  return chunk;
}

const pretty = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value, null, 2) ?? String(value));

/** A run's element in the tree, kept across renders: only what changed is written. */
interface View {
  li: HTMLLIElement;
  details: HTMLDetailsElement;
  time: HTMLSpanElement;
  input: HTMLPreElement;
  output: HTMLPreElement;
  children: HTMLUListElement | undefined;
}

/** Sets a node's text only when it changed: a rewrite would drop a selection in it and its scroll position. */
function setText(el: HTMLElement, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}

export class RunTree {
  readonly element = h('div', { class: 'run-tree', attrs: { 'aria-live': 'polite' } });
  private nodes = new Map<string, Node>();
  private views = new Map<string, View>();
  private roots: Node[] = [];
  private readonly list = h('ul', { class: 'runs' });
  private scheduled = false;

  constructor() {
    this.element.append(this.list);
  }

  /** A reconnect happened during this run: steps under way, and those to come, arrive replayed (see {@link reconnected}). */
  private replayed = false;

  /**
   * The connection dropped and is being rejoined: what the steps under way did meanwhile, and the steps the
   * rejoin replays, arrive in one burst, so their durations as measured here would count the outage (or
   * nothing). Events carry no timestamps; those steps show no duration rather than a wrong one.
   */
  reconnected(): void {
    this.replayed = true;
    for (const node of this.nodes.values()) if (node.status === 'running') node.untimed = true;
    this.schedule();
  }

  reset(): void {
    this.replayed = false;
    this.nodes.clear();
    this.views.clear();
    this.roots = [];
    clear(this.list);
  }

  /** The root run's id (the chain itself), once it has started. */
  get rootId(): string | undefined {
    return this.roots[0]?.id;
  }

  add(event: StreamEvent): void {
    const match = /^on_(\w+?)_(start|end|stream|error)$/.exec(event.event);
    if (match === null) return;
    const [, type, phase] = match as unknown as [string, string, string];
    let node = this.nodes.get(event.run_id);
    if (node === undefined) {
      node = { id: event.run_id, name: event.name, type, started: performance.now(), status: 'running', children: [], ...(this.replayed ? { untimed: true } : {}) };
      this.nodes.set(node.id, node);
      const parentId = event.parent_ids?.at(-1);
      const parent = parentId === undefined ? undefined : this.nodes.get(parentId);
      (parent?.children ?? this.roots).push(node);
    }
    if (phase === 'start') node.input = event.data?.input;
    if (phase === 'stream') node.output = mergeChunk(node.output, event.data?.chunk);
    if (phase === 'end') {
      node.ended = performance.now();
      node.status = 'done';
      if (event.data?.input !== undefined) node.input = event.data.input;
      node.output = event.data?.output ?? node.output;
    }
    if (phase === 'error') {
      node.ended = performance.now();
      node.status = 'error';
      node.output = event.data?.error;
    }
    this.schedule();
  }

  /**
   * Marks runs still open as stopped (after Stop or an error elsewhere): not failed, just not finished — or,
   * `finished`, as done: the run ended on the server after the page stopped following it (its Stop came too
   * late), so their durations are not known here.
   */
  /** Ends the steps still running: `finished` (done), `stopped` (a Stop cut them short) or `failed` (the run did). */
  stopAll(how: 'stopped' | 'finished' | 'failed' = 'stopped'): void {
    for (const node of this.nodes.values()) {
      if (node.status === 'running') {
        node.status = how === 'finished' ? 'done' : how === 'failed' ? 'error' : 'stopped';
        if (how !== 'finished') node.ended = performance.now();
      }
    }
    this.render();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      this.render();
    });
  }

  /**
   * Brings the tree up to date. Elements are made once per run and updated in place, so a step the person
   * opened, focused, scrolled or selected text in stays as it is while the run streams on.
   */
  render(): void {
    this.place(this.roots, this.list);
  }

  private place(nodes: Node[], into: HTMLUListElement): void {
    nodes.forEach((node, i) => {
      const view = this.view(node);
      if (into.children[i] !== view.li) into.insertBefore(view.li, into.children[i] ?? null);
      if (node.children.length > 0) {
        view.children ??= view.li.appendChild(h('ul'));
        this.place(node.children, view.children);
      }
    });
  }

  private view(node: Node): View {
    let view = this.views.get(node.id);
    if (view === undefined) {
      const time = h('span', { class: 'run-time' });
      const input = h('pre');
      const output = h('pre');
      const details = h(
        'details',
        {},
        h('summary', {}, h('span', { class: 'run-name', text: node.name }), h('span', { class: 'run-type', text: node.type }), time),
        h('div', { class: 'run-io' }, h('div', { class: 'io-label', text: 'Input' }), input, h('div', { class: 'io-label', text: 'Output' }), output),
      );
      const li = h('li', { attrs: { 'data-run-name': node.name, 'data-run-type': node.type } }, details);
      view = { li, details, time, input, output, children: undefined };
      this.views.set(node.id, view);
    }
    const duration =
      node.untimed === true && node.status !== 'running'
        ? 'time unknown (reconnected)'
        : node.ended !== undefined
          ? `${Math.max(0, Math.round(node.ended - node.started))} ms`
          : node.status === 'done'
            ? 'done'
            : 'running…';
    const status = `run status-${node.status}`;
    if (view.details.className !== status) view.details.className = status;
    setText(view.time, node.status !== 'stopped' ? duration : node.untimed === true ? 'stopped (time unknown: reconnected)' : `stopped after ${duration}`);
    setText(view.input, pretty(node.input));
    setText(view.output, pretty(node.output));
    return view;
  }
}
