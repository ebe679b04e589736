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
  status: 'running' | 'done' | 'error';
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

export class RunTree {
  readonly element = h('div', { class: 'run-tree', attrs: { 'aria-live': 'polite' } });
  private nodes = new Map<string, Node>();
  /** Runs whose details the person opened: kept open across live re-renders. */
  private open = new Set<string>();
  private roots: Node[] = [];
  private scheduled = false;

  reset(): void {
    this.nodes.clear();
    this.open.clear();
    this.roots = [];
    clear(this.element);
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
      node = { id: event.run_id, name: event.name, type, started: performance.now(), status: 'running', children: [] };
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

  /** Marks runs still open as stopped (after Stop or an error). */
  stopAll(): void {
    for (const node of this.nodes.values()) {
      if (node.status === 'running') {
        node.status = 'error';
        node.ended = performance.now();
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

  render(): void {
    clear(this.element);
    const list = h('ul', { class: 'runs' });
    for (const root of this.roots) list.append(this.item(root));
    this.element.append(list);
  }

  private item(node: Node): HTMLLIElement {
    const duration = node.ended === undefined ? 'running…' : `${Math.max(0, Math.round(node.ended - node.started))} ms`;
    const details = h(
      'details',
      { class: `run status-${node.status}`, open: this.open.has(node.id) },
      h('summary', {}, h('span', { class: 'run-name', text: node.name }), h('span', { class: 'run-type', text: node.type }), h('span', { class: 'run-time', text: duration })),
      h('div', { class: 'run-io' }, h('div', { class: 'io-label', text: 'Input' }), h('pre', { text: pretty(node.input) }), h('div', { class: 'io-label', text: 'Output' }), h('pre', { text: pretty(node.output) })),
    );
    details.addEventListener('toggle', () => (details.open ? this.open.add(node.id) : this.open.delete(node.id)));
    const li = h('li', { attrs: { 'data-run-name': node.name, 'data-run-type': node.type } }, details);
    if (node.children.length > 0) {
      const children = h('ul');
      for (const child of node.children) children.append(this.item(child));
      li.append(children);
    }
    return li;
  }
}
