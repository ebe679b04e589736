/**
 * A form generated from a JSON Schema: text, numbers, booleans, enums as
 * selects, arrays with rows to add and remove, nested objects, and message
 * lists as role + content rows. Each field carries its path, so a
 * validation issue shows next to the field it is about.
 */
import { clear, h } from './dom.js';
import { defaultValue, kindOf, resolve, unwrapNullable, type Issue, type Schema } from './schema.js';

const ROLES = ['human', 'ai', 'system'] as const;
/** The other names a message's role goes by (OpenAI's roles), as the server reads them. */
const ROLE_NAMES: Record<string, string> = { user: 'human', assistant: 'ai', developer: 'system' };
/** Most issues shown on one field: the server can report one problem in many words (every alternative that failed). */
const MOST_ISSUES_PER_FIELD = 3;

/** What the keyboard can be put on to type a value. */
const CONTROLS = 'input, select, textarea';

/**
 * `message` with its role or text changed, in the form it came in: a tuple stays a tuple, `{role}` keeps
 * `role`, every other field (`tool_calls`, `name`, `id`…) stays, and an untouched text stays as it was (list
 * content included). A plain string (a human message) stays one unless its role changes.
 */
function rewrite(message: unknown, next: { role?: string; content?: string }): unknown {
  if (typeof message === 'string') {
    if (next.role === undefined || next.role === 'human') return next.content ?? message;
    return { type: next.role, content: next.content ?? message };
  }
  if (Array.isArray(message)) return [next.role ?? message[0], next.content === undefined ? message[1] : edited(message[1], next.content)];
  if (message !== null && typeof message === 'object') {
    const m = message as Record<string, unknown>;
    const key = typeof m.type !== 'string' && typeof m.role === 'string' ? 'role' : 'type';
    return { ...m, ...(next.role === undefined ? {} : { [key]: next.role }), ...(next.content === undefined ? {} : { content: edited(m.content, next.content) }) };
  }
  return { type: next.role ?? 'human', content: next.content ?? '' };
}

/**
 * A content with its text edited, in its form: a list of parts keeps its other parts (an image) where they
 * are, its text in the place of its first text part (a probe: one keystroke made the list a string of its
 * JSON, and the image was gone); anything else becomes the text.
 */
function edited(content: unknown, text: string): unknown {
  if (!Array.isArray(content)) return text;
  const isText = (part: unknown): boolean => (part as { type?: unknown } | null)?.type === 'text';
  const first = content.findIndex(isText);
  const kept = content.filter((part, index) => !isText(part) || index === first);
  return first === -1 ? [{ type: 'text', text }, ...kept] : kept.map((part) => (isText(part) ? { ...(part as object), type: 'text', text } : part));
}

/** The text a content shows in its row: a string as it is, a list's text parts joined, none as empty. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (Array.isArray(content)) {
    return content
      .filter((part): part is { type: 'text'; text: string } => (part as { type?: unknown } | null)?.type === 'text' && typeof (part as { text?: unknown }).text === 'string')
      .map((part) => part.text)
      .join('');
  }
  return JSON.stringify(content);
}

/**
 * A message in any form the server takes — `{type, content}`, `{role, content}`, `[role, content]` or a plain
 * string (a human message) — as the role and text its row shows.
 */
function messageParts(message: unknown): { role: string; content: string } {
  const text = contentText;
  if (typeof message === 'string') return { role: 'human', content: message };
  if (Array.isArray(message)) {
    const role = String(message[0] ?? 'human');
    return { role: ROLE_NAMES[role] ?? role, content: text(message[1]) };
  }
  if (message !== null && typeof message === 'object') {
    const m = message as { type?: unknown; role?: unknown; content?: unknown };
    const role = typeof m.type === 'string' ? m.type : typeof m.role === 'string' ? (ROLE_NAMES[m.role] ?? m.role) : 'human';
    return { role, content: text(m.content) };
  }
  return { role: 'human', content: '' };
}

export const pathKey = (path: (string | number)[]): string => path.map(String).join('.');

function getAt(value: unknown, path: (string | number)[]): unknown {
  let current = value;
  for (const part of path) current = (current as Record<string | number, unknown> | undefined)?.[part];
  return current;
}

function setAt(root: unknown, path: (string | number)[], next: unknown): unknown {
  if (path.length === 0) return next;
  const [head, ...rest] = path as [string | number, ...(string | number)[]];
  const container = (Array.isArray(root) ? [...root] : { ...((root as Record<string, unknown>) ?? {}) }) as Record<string | number, unknown>;
  const child = setAt(container[head], rest, next);
  if (child === undefined) delete container[head];
  else container[head] = child;
  return container;
}

export class SchemaForm {
  readonly element = h('div', { class: 'schema-form' });
  private current: unknown;

  constructor(
    private readonly schema: Schema,
    initial: unknown,
    private readonly onChange: (value: unknown) => void = () => {},
    private readonly options: { skip?: string[] } = {},
  ) {
    this.current = initial === undefined ? defaultValue(schema, schema) : initial;
    this.render();
  }

  get value(): unknown {
    return this.current;
  }

  /** The list at `path` as it is now (a row's buttons must not use the list of the last render: typing edits it). */
  private listAt(path: (string | number)[]): unknown[] {
    const list = getAt(this.current, path);
    return Array.isArray(list) ? list : [];
  }

  setValue(value: unknown): void {
    this.current = value;
    this.render();
  }

  /**
   * Marks the fields that `issues` are about; issues without a field show at the top. The same words twice on
   * a field show once, and a field shows at most a few (the rest counted).
   */
  showIssues(issues: Issue[]): void {
    for (const el of this.element.querySelectorAll('.field-error')) el.remove();
    for (const el of this.element.querySelectorAll('.invalid')) el.classList.remove('invalid');
    const shown = new Map<Element | null, { texts: Set<string>; hidden: number }>();
    for (const issue of issues) {
      let field: Element | null = null;
      for (let n = issue.path.length; n >= 0 && field === null; n--) field = this.element.querySelector(`[data-path="${CSS.escape(pathKey(issue.path.slice(0, n)))}"]`);
      const text = `${issue.path.length > 0 ? `${pathKey(issue.path)}: ` : ''}${issue.message}`;
      const seen = shown.get(field) ?? { texts: new Set<string>(), hidden: 0 };
      shown.set(field, seen);
      if (seen.texts.has(text)) continue;
      if (seen.texts.size >= MOST_ISSUES_PER_FIELD) {
        seen.hidden++;
        continue;
      }
      seen.texts.add(text);
      const message = h('div', { class: 'field-error', text, attrs: { role: 'alert' } });
      if (field === null) this.element.prepend(message);
      else {
        field.classList.add('invalid');
        field.append(message);
      }
    }
    for (const [field, seen] of shown) {
      if (seen.hidden === 0) continue;
      const more = h('div', { class: 'field-error', text: `and ${seen.hidden} more` });
      if (field === null) this.element.prepend(more);
      else field.append(more);
    }
  }

  private update(path: (string | number)[], value: unknown, rerender = false, focus?: () => Element | null | undefined): void {
    this.current = setAt(this.current, path, value);
    this.onChange(this.current);
    if (rerender) {
      // The button that drew the form anew is gone with the old elements, and the keyboard's place with it:
      // `focus` names where it goes in the new ones.
      const hadFocus = this.element.contains(document.activeElement);
      this.render();
      const next = hadFocus ? focus?.() : undefined;
      if (next instanceof HTMLElement) next.focus();
    } else {
      this.clearIssuesAt(path);
      // An optional object the edit brought into the input can be left out again.
      for (let n = 1; n < path.length; n++) {
        const button = this.leaveOut.get(pathKey(path.slice(0, n)));
        if (button !== undefined) button.hidden = getAt(this.current, path.slice(0, n)) == null;
      }
    }
  }

  /** The "Leave out" button of each optional object, by its path. */
  private readonly leaveOut = new Map<string, HTMLButtonElement>();

  /** An edited field's issues go: they were about the value it had. */
  private clearIssuesAt(path: (string | number)[]): void {
    for (let n = path.length; n >= 0; n--) {
      const field = this.element.querySelector(`[data-path="${CSS.escape(pathKey(path.slice(0, n)))}"]`);
      if (field === null) continue;
      for (const el of field.querySelectorAll(':scope > .field-error')) el.remove();
      field.classList.remove('invalid');
      return;
    }
  }

  /** The rows of the list at `path` and its add button, as drawn now. */
  private listDrawn(path: (string | number)[]): { rows: Element[]; add: Element | null } {
    const list = this.element.querySelector(`[data-path="${CSS.escape(pathKey(path))}"] > .array`);
    return { rows: list === null ? [] : [...list.querySelectorAll(':scope > .array-row')], add: list?.querySelector(':scope > .add') ?? null };
  }

  /** Added: the new row's first control. */
  private focusAdded(path: (string | number)[]): () => Element | null | undefined {
    return () => this.listDrawn(path).rows.at(-1)?.querySelector(CONTROLS);
  }

  /** Removed row `i`: the Remove of the row now in its place, else of the row before, else the add button. */
  private focusRemoved(path: (string | number)[], i: number): () => Element | null | undefined {
    return () => {
      const { rows, add } = this.listDrawn(path);
      return (rows[i] ?? rows[i - 1])?.querySelector(':scope > .remove') ?? add;
    };
  }

  private render(): void {
    this.leaveOut.clear();
    clear(this.element);
    this.element.append(this.field(this.schema, [], '', true));
  }

  private field(schema: Schema, path: (string | number)[], label: string, required: boolean): HTMLElement {
    const root = this.schema;
    const { schema: s, nullable } = unwrapNullable(schema, root);
    const value = getAt(this.current, path);
    const id = `f-${pathKey(path) || 'root'}`.replace(/[^\w-]/g, '_');
    const wrap = h('div', { class: 'field', attrs: { 'data-path': pathKey(path) } });
    const title = s.title ?? label;
    if (title !== '') wrap.append(h('label', { htmlFor: id, text: `${title}${required ? '' : ' (optional)'}` }));
    if (s.description) wrap.append(h('div', { class: 'hint', text: s.description }));
    const kind = kindOf(s, root);
    switch (kind) {
      case 'string': {
        const long = (s.maxLength ?? 1000) > 200;
        // dir=auto: text typed in Hebrew or Arabic reads right to left as it is typed.
        const input = long ? h('textarea', { id, rows: 2, dir: 'auto' }) : h('input', { id, type: 'text', dir: 'auto' });
        // A value of another type (typed into the JSON tab) shows as it is, with its error, not as an empty field.
        input.value = typeof value === 'string' ? value : value === undefined || value === null ? '' : JSON.stringify(value);
        input.addEventListener('input', () => this.update(path, input.value === '' && (nullable || !required) ? (nullable ? null : undefined) : input.value));
        wrap.append(input);
        break;
      }
      case 'number':
      case 'integer': {
        const input = h('input', { id, type: 'number', step: kind === 'integer' ? '1' : 'any' });
        input.value = typeof value === 'number' ? String(value) : '';
        input.addEventListener('input', () => this.update(path, input.value === '' ? (nullable ? null : undefined) : Number(input.value)));
        wrap.append(input);
        break;
      }
      case 'boolean': {
        const input = h('input', { id, type: 'checkbox', checked: value === true });
        input.addEventListener('change', () => this.update(path, input.checked));
        wrap.classList.add('checkbox');
        wrap.prepend(input);
        break;
      }
      case 'enum': {
        const options = s.enum ?? [s.const];
        const select = h('select', { id });
        if (nullable || !required) select.append(h('option', { value: '', text: '—' }));
        options.forEach((option, i) => select.append(h('option', { value: String(i), text: String(option), selected: JSON.stringify(option) === JSON.stringify(value) })));
        // A value the schema does not list (a shared link's, typed into the JSON tab) shows as it is, with its error.
        if (value !== undefined && value !== null && !options.some((option) => JSON.stringify(option) === JSON.stringify(value))) {
          select.append(h('option', { value: 'other', text: `${typeof value === 'string' ? value : JSON.stringify(value)} (not allowed)`, selected: true, disabled: true }));
        }
        select.addEventListener('change', () => this.update(path, select.value === '' ? (nullable ? null : undefined) : options[Number(select.value)]));
        wrap.append(select);
        break;
      }
      case 'object': {
        const group = h('fieldset', { class: path.length === 0 ? 'root' : 'nested' });
        for (const [key, prop] of Object.entries(s.properties ?? {})) {
          if (path.length === 0 && this.options.skip?.includes(key)) continue;
          group.append(this.field(prop, [...path, key], key, s.required?.includes(key) ?? false));
        }
        // An optional object, once filled in, can be left out again (its own fields may be required); shown
        // while it is in the input (see `update`).
        if (path.length > 0 && (nullable || !required)) {
          const label = wrap.querySelector(':scope > label');
          const clearButton = h('button', { type: 'button', class: 'clear', text: 'Leave out', hidden: value === undefined || value === null, attrs: { 'aria-label': `Leave out ${title || pathKey(path)}` }, on: { click: () => this.update(path, nullable ? null : undefined, true, () => this.element.querySelector(`[data-path="${CSS.escape(pathKey(path))}"]`)?.querySelector(CONTROLS)) } });
          this.leaveOut.set(pathKey(path), clearButton);
          if (label === null) wrap.prepend(clearButton);
          else label.after(clearButton);
        }
        wrap.append(group);
        break;
      }
      case 'array': {
        const items = Array.isArray(value) ? value : [];
        const itemSchema = resolve(Array.isArray(s.items) ? {} : (s.items ?? {}), root);
        const list = h('div', { class: 'array' });
        items.forEach((_, i) => {
          const row = h('div', { class: 'array-row' }, this.field(itemSchema, [...path, i], `#${i + 1}`, true));
          row.append(h('button', { type: 'button', class: 'remove', text: 'Remove', on: { click: () => this.update(path, this.listAt(path).filter((__, j) => j !== i), true, this.focusRemoved(path, i)) } }));
          list.append(row);
        });
        list.append(h('button', { type: 'button', class: 'add', text: 'Add item', on: { click: () => this.update(path, [...this.listAt(path), defaultValue(itemSchema, root)], true, this.focusAdded(path)) } }));
        wrap.append(list);
        break;
      }
      case 'messages': {
        const items = (Array.isArray(value) ? value : []) as unknown[];
        const list = h('div', { class: 'array messages' });
        items.forEach((message, i) => {
          const parts = messageParts(message);
          // A role the select does not list (one the server will refuse) is shown as it is, not as "human".
          const roles: string[] = ROLES.includes(parts.role as (typeof ROLES)[number]) ? [...ROLES] : [...ROLES, parts.role];
          const role = h('select', { attrs: { 'aria-label': 'Role' } }, ...roles.map((r) => h('option', { value: r, text: r, selected: parts.role === r })));
          const content = h('textarea', { rows: 2, value: parts.content, dir: 'auto', attrs: { 'aria-label': 'Content' } });
          // An edit changes what was edited, in the message's own form.
          role.addEventListener('change', () => this.update([...path, i], rewrite(getAt(this.current, [...path, i]), { role: role.value })));
          content.addEventListener('input', () => this.update([...path, i], rewrite(getAt(this.current, [...path, i]), { content: content.value })));
          const row = h('div', { class: 'array-row message-row', attrs: { 'data-path': pathKey([...path, i]) } }, role, content);
          row.append(h('button', { type: 'button', class: 'remove', text: 'Remove', on: { click: () => this.update(path, this.listAt(path).filter((__, j) => j !== i), true, this.focusRemoved(path, i)) } }));
          list.append(row);
        });
        list.append(h('button', { type: 'button', class: 'add', text: 'Add message', on: { click: () => this.update(path, [...this.listAt(path), { type: 'human', content: '' }], true, this.focusAdded(path)) } }));
        wrap.append(list);
        break;
      }
      default: {
        const input = h('textarea', { id, rows: 3, class: 'json', value: value === undefined ? '' : JSON.stringify(value, null, 2) });
        input.addEventListener('input', () => {
          try {
            this.update(path, input.value.trim() === '' ? undefined : JSON.parse(input.value));
            input.classList.remove('invalid');
          } catch {
            input.classList.add('invalid');
          }
        });
        wrap.append(input);
      }
    }
    return wrap;
  }
}
