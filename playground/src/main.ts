/**
 * The playground of one chain, at `{chain}/playground/` (or
 * `{chain}/c/{config}/playground/`): a form from the input schema with a
 * JSON tab, a config panel from the config schema, a run that streams
 * `/stream_events` into a growing output and a live tree of steps — as a
 * durable run, rejoined where it left off when the connection drops — Stop
 * (which cancels the run on the server), chat mode for chains with history,
 * and a share link holding the input and the config.
 */
import LZString from 'lz-string';
import { ApiError, apiKey, durableStream, getJson, setApiKey } from './api.js';
import { clear, h } from './dom.js';
import { SchemaForm } from './form.js';
import { markdown } from './markdown.js';
import { mergeChunk, RunTree, type StreamEvent } from './runs.js';
import { inSchemaOrder, validate, type Issue, type Schema } from './schema.js';

interface ChainInfo {
  path: string;
  description: string;
  playground: 'default' | 'chat';
}

const info = JSON.parse(document.querySelector('meta[name="runnel-chain"]')?.getAttribute('content') || '{}') as ChainInfo;
const SHARED = /\/c\/([^/]+)\/playground\/?$/;
const shared = SHARED.exec(location.pathname);
/**
 * The chain's URL relative to this page — read from the address each time,
 * since the share link rewrites it. Every request is relative, so prefixes
 * and proxies just work.
 */
const chainBase = (): string => (SHARED.test(location.pathname) ? '../../../' : '../');
/** The chain's path as this page found it at load (`/prefix/joke/`), before any rewrite of the address. */
const CHAIN = new URL(chainBase(), location.href).pathname;
const url = (endpoint: string): string => `${CHAIN}${endpoint}`;
/** What the status area says while a dropped connection is being rejoined. */
const RECONNECTING = 'Connection lost — reconnecting…';
// The server links its icon relative to this address; pin it before the share link rewrites the address (Chromium re-resolves it).
const icon = document.querySelector<HTMLLinkElement>('link[rel="icon"]');
if (icon !== null) icon.setAttribute('href', icon.href);

const decode = (text: string | null | undefined): unknown => {
  if (!text) return undefined;
  try {
    const json = LZString.decompressFromEncodedURIComponent(text);
    return json ? (JSON.parse(json) as unknown) : undefined;
  } catch {
    return undefined;
  }
};
const encode = (value: unknown): string => LZString.compressToEncodedURIComponent(JSON.stringify(value ?? {}));

const app = document.getElementById('app') as HTMLElement;

function errorBox(error: unknown): HTMLElement {
  if (error instanceof ApiError) {
    return h('div', { class: 'error', attrs: { role: 'alert' } }, h('strong', { class: 'error-code', text: error.code }), ` (${error.status}) `, error.message);
  }
  return h('div', { class: 'error', attrs: { role: 'alert' } }, error instanceof Error ? error.message : String(error));
}

/** Turns the server's 422 detail on the input (`loc` paths relative to the input) into form issues. */
function serverIssues(error: ApiError): Issue[] {
  if (error.code !== 'RUNNEL_ERR_INPUT_INVALID' || !Array.isArray(error.detail)) return [];
  return (error.detail as { loc?: (string | number)[]; msg?: string }[])
    .filter((d) => Array.isArray(d.loc))
    .map((d) => ({ path: d.loc ?? [], message: d.msg ?? 'invalid' }));
}

function keyPanel(onSaved: () => void): HTMLElement {
  const input = h('input', { type: 'password', placeholder: 'API key', autocomplete: 'off', attrs: { 'aria-label': 'API key' } });
  const form = h(
    'form',
    { class: 'key-panel' },
    h('p', { text: 'This server needs an API key. It is kept in this tab’s session storage only.' }),
    input,
    h('button', { type: 'submit', text: 'Use key' }),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    setApiKey(input.value.trim());
    onSaved();
  });
  return form;
}

async function boot(): Promise<void> {
  clear(app);
  let inputSchema: Schema;
  let configSchema: Schema;
  let outputSchema: Schema | undefined;
  try {
    [inputSchema, configSchema, outputSchema] = await Promise.all([
      getJson<Schema>(url('input_schema')),
      getJson<Schema>(url('config_schema')),
      // Only orders the output: a chain without the endpoint still runs.
      getJson<Schema>(url('output_schema')).catch(() => undefined),
    ]);
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
      if (apiKey() !== null) app.append(errorBox(error));
      app.append(keyPanel(() => void boot()));
      return;
    }
    app.append(errorBox(error));
    return;
  }
  const header = h(
    'header',
    {},
    h('h1', {}, h('a', { href: `${CHAIN}../`, text: 'Runnel' }), ' ', h('code', { text: info.path })),
    h('p', { class: 'description', text: info.description }),
    h('nav', {}, h('a', { href: `${CHAIN}../docs`, text: 'API docs' }), ' · ', h('a', { href: url('input_schema'), text: 'input schema' }), ' · ', h('a', { href: url('output_schema'), text: 'output schema' })),
  );
  app.append(header);
  if (info.playground === 'chat') chatPage(inputSchema, configSchema);
  else runPage(inputSchema, configSchema, outputSchema);
}

/** The configurable fields, as a form (nothing when the chain has none). */
function configForm(configSchema: Schema, initial: unknown, onChange: () => void, skip: string[] = []): SchemaForm | undefined {
  const configurable = configSchema.properties?.configurable;
  if (configurable === undefined || Object.keys(configurable.properties ?? {}).filter((k) => !skip.includes(k)).length === 0) return undefined;
  const schema: Schema = { ...configurable, title: '', $defs: configSchema.$defs, definitions: configSchema.definitions };
  return new SchemaForm(schema, initial, onChange, { skip });
}

function runPage(inputSchema: Schema, configSchema: Schema, outputSchema: Schema | undefined): void {
  const sharedConfig = decode(shared?.[1]) as { configurable?: Record<string, unknown> } | undefined;
  const sharedInput = decode(new URLSearchParams(location.hash.slice(1)).get('input'));
  const syncUrl = (): void => {
    const config = configPanel === undefined ? {} : { configurable: configPanel.value };
    const target = new URL(`${CHAIN}c/${encode(config)}/playground/#input=${encode(form.value)}`, location.href);
    history.replaceState(null, '', target.href);
  };
  const jsonArea = h('textarea', { class: 'json', rows: 8, attrs: { 'aria-label': 'Input as JSON' } });
  const jsonIssues = h('div', { class: 'json-issues' });
  const form = new SchemaForm({ ...inputSchema, title: '' }, sharedInput, (value) => {
    jsonArea.value = JSON.stringify(value, null, 2);
    syncUrl();
  });
  const configPanel = configForm(configSchema, sharedConfig?.configurable, syncUrl);
  jsonArea.value = JSON.stringify(form.value, null, 2);
  jsonArea.addEventListener('input', () => {
    clear(jsonIssues);
    try {
      const value = JSON.parse(jsonArea.value) as unknown;
      const issues = validate(value, inputSchema, inputSchema);
      for (const issue of issues) jsonIssues.append(h('div', { class: 'field-error', text: `${issue.path.join('.') || 'input'}: ${issue.message}` }));
      form.setValue(value);
      syncUrl();
    } catch (error) {
      jsonIssues.append(h('div', { class: 'field-error', text: `Not JSON: ${(error as Error).message}` }));
    }
  });

  const formTab = h('button', { type: 'button', class: 'tab active', text: 'Form' });
  const jsonTab = h('button', { type: 'button', class: 'tab', text: 'JSON' });
  const jsonPane = h('div', { class: 'pane', hidden: true }, jsonArea, jsonIssues);
  const formPane = h('div', { class: 'pane' }, form.element);
  formTab.addEventListener('click', () => {
    formTab.classList.add('active');
    jsonTab.classList.remove('active');
    formPane.hidden = false;
    jsonPane.hidden = true;
  });
  jsonTab.addEventListener('click', () => {
    jsonTab.classList.add('active');
    formTab.classList.remove('active');
    jsonPane.hidden = false;
    formPane.hidden = true;
    jsonArea.value = JSON.stringify(form.value, null, 2);
  });

  const runButton = h('button', { type: 'button', class: 'primary', text: 'Run' });
  const stopButton = h('button', { type: 'button', text: 'Stop', disabled: true });
  const shareButton = h('button', { type: 'button', text: 'Copy share link' });
  const status = h('span', { class: 'status', attrs: { role: 'status' } });
  const mode = h('select', { attrs: { 'aria-label': 'Render output as' } }, ...['auto', 'text', 'markdown', 'json'].map((m) => h('option', { value: m, text: m })));
  const output = h('div', { class: 'output', attrs: { 'data-testid': 'output' } });
  const errors = h('div', { class: 'errors' });
  const tree = new RunTree();
  let current: unknown;
  let controller: AbortController | undefined;

  const renderOutput = (): void => {
    clear(output);
    if (current === undefined) return;
    const as = mode.value === 'auto' ? (typeof current === 'string' ? 'markdown' : 'json') : mode.value;
    if (as === 'json' || typeof current !== 'string') {
      const shown = outputSchema === undefined ? current : inSchemaOrder(current, outputSchema, outputSchema);
      output.append(h('pre', { class: 'json-output', text: JSON.stringify(shown, null, 2) }));
    }
    else if (as === 'markdown') output.append(markdown(current));
    else output.append(h('pre', { class: 'text-output', text: current }));
  };
  mode.addEventListener('change', renderOutput);
  shareButton.addEventListener('click', () => {
    syncUrl();
    void navigator.clipboard?.writeText(location.href).then(
      () => (status.textContent = 'Share link copied'),
      () => (status.textContent = 'The address bar holds the share link'),
    );
  });

  const run = async (): Promise<void> => {
    const input = form.value;
    const issues = validate(input, inputSchema, inputSchema);
    form.showIssues(issues);
    clear(errors);
    if (issues.length > 0) {
      status.textContent = 'Fix the highlighted fields';
      return;
    }
    const config = configPanel === undefined ? {} : { configurable: configPanel.value };
    controller = new AbortController();
    runButton.disabled = true;
    stopButton.disabled = false;
    status.textContent = 'Running…';
    current = undefined;
    renderOutput();
    tree.reset();
    const started = performance.now();
    try {
      await durableStream(CHAIN, 'stream_events', { input, config }, controller.signal, {
        onFrame: ({ event, data }) => {
          if (event !== 'data') return;
          const e = data as StreamEvent;
          tree.add(e);
          if (e.run_id === tree.rootId) {
            if (e.event === 'on_chain_stream') current = mergeChunk(current, e.data?.chunk);
            if (e.event === 'on_chain_end' && e.data?.output !== undefined) current = e.data.output;
            renderOutput();
          }
        },
        onReconnecting: () => (status.textContent = RECONNECTING),
        onReconnected: () => (status.textContent = 'Running…'),
      });
      status.textContent = `Done in ${Math.round(performance.now() - started)} ms`;
    } catch (error) {
      tree.stopAll();
      if (controller.signal.aborted) status.textContent = 'Stopped';
      else {
        status.textContent = 'Failed';
        errors.append(errorBox(error));
        if (error instanceof ApiError) form.showIssues(serverIssues(error));
        if (error instanceof ApiError && error.status === 401) errors.append(keyPanel(() => void run()));
      }
    } finally {
      tree.render();
      runButton.disabled = false;
      stopButton.disabled = true;
      controller = undefined;
    }
  };
  runButton.addEventListener('click', () => void run());
  stopButton.addEventListener('click', () => {
    if (controller === undefined) return;
    // The run lives on the server until it is cancelled there: say so until the server has answered.
    stopButton.disabled = true;
    status.textContent = 'Stopping…';
    controller.abort();
  });

  app.append(
    h(
      'main',
      { class: 'layout' },
      h(
        'section',
        { class: 'card input' },
        h('h2', { text: 'Input' }),
        h('div', { class: 'tabs' }, formTab, jsonTab),
        formPane,
        jsonPane,
        configPanel === undefined ? null : h('details', { class: 'config', open: true }, h('summary', { text: 'Configuration' }), configPanel.element),
        h('div', { class: 'actions' }, runButton, stopButton, shareButton, status),
      ),
      h('section', { class: 'card result' }, h('h2', {}, 'Output ', mode), errors, output, h('h2', { text: 'Steps' }), tree.element),
    ),
  );
}

function chatPage(inputSchema: Schema, configSchema: Schema): void {
  const storageKey = `runnel:session:${info.path}`;
  const newSession = (): string => {
    const id = crypto.randomUUID();
    localStorage.setItem(storageKey, id);
    return id;
  };
  let session = localStorage.getItem(storageKey) ?? newSession();
  // The input's text field: the one string property (`message`, `input`, `question`, ...).
  const messageKey = Object.entries(inputSchema.properties ?? {}).find(([, s]) => s.type === 'string')?.[0] ?? 'input';
  const log = h('div', { class: 'chat-log', attrs: { 'aria-live': 'polite' } });
  const text = h('textarea', { rows: 2, placeholder: 'Message', attrs: { 'aria-label': 'Message' } });
  const sendButton = h('button', { type: 'submit', class: 'primary', text: 'Send' });
  const stopButton = h('button', { type: 'button', text: 'Stop', disabled: true });
  const sessionLabel = h('code', { class: 'session-id', text: session });
  const errors = h('div', { class: 'errors' });
  const status = h('div', { class: 'status', attrs: { role: 'status' } });
  const tree = new RunTree();
  const configPanel = configForm(configSchema, undefined, () => {}, ['session_id']);
  let controller: AbortController | undefined;

  const bubble = (role: string, content: string): HTMLElement => {
    const el = h('div', { class: `bubble ${role === 'human' ? 'human' : 'ai'}`, attrs: { 'data-role': role } });
    el.append(role === 'human' ? document.createTextNode(content) : markdown(content));
    log.append(el);
    log.scrollTop = log.scrollHeight;
    return el;
  };
  const loadHistory = async (): Promise<void> => {
    clear(log);
    try {
      const history = await getJson<{ messages: { type: string; content: unknown }[] }>(url(`history/${encodeURIComponent(session)}`));
      for (const message of history.messages) bubble(message.type, typeof message.content === 'string' ? message.content : JSON.stringify(message.content));
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) errors.append(errorBox(error));
    }
  };

  const chat = async (): Promise<void> => {
    const message = text.value.trim();
    if (message === '') return;
    clear(errors);
    const input = { [messageKey]: message };
    const issues = validate(input, inputSchema, inputSchema);
    if (issues.length > 0) {
      for (const issue of issues) errors.append(h('div', { class: 'field-error', text: `${issue.path.join('.')}: ${issue.message}` }));
      return;
    }
    text.value = '';
    bubble('human', message);
    const answer = bubble('ai', '');
    answer.classList.add('streaming');
    let content: unknown;
    controller = new AbortController();
    sendButton.disabled = true;
    stopButton.disabled = false;
    tree.reset();
    try {
      const config = { configurable: { ...((configPanel?.value as Record<string, unknown>) ?? {}), session_id: session } };
      await durableStream(CHAIN, 'stream_events', { input, config }, controller.signal, {
        onFrame: ({ event, data }) => {
          if (event !== 'data') return;
          const e = data as StreamEvent;
          tree.add(e);
          if (e.run_id === tree.rootId && e.event === 'on_chain_stream') {
            content = mergeChunk(content, e.data?.chunk);
            clear(answer);
            answer.append(typeof content === 'string' ? markdown(content) : h('pre', { text: JSON.stringify(content, null, 2) }));
            log.scrollTop = log.scrollHeight;
          }
        },
        onReconnecting: () => (status.textContent = RECONNECTING),
        onReconnected: () => (status.textContent = ''),
      });
    } catch (error) {
      tree.stopAll();
      if (!controller.signal.aborted) errors.append(errorBox(error));
      answer.classList.add('failed');
    } finally {
      status.textContent = '';
      answer.classList.remove('streaming');
      tree.render();
      sendButton.disabled = false;
      stopButton.disabled = true;
      controller = undefined;
    }
  };

  const composer = h('form', { class: 'composer' }, text, sendButton, stopButton);
  composer.addEventListener('submit', (event) => {
    event.preventDefault();
    void chat();
  });
  text.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey) {
      event.preventDefault();
      void chat();
    }
  });
  stopButton.addEventListener('click', () => {
    if (controller === undefined) return;
    stopButton.disabled = true;
    status.textContent = 'Stopping…';
    controller.abort();
  });
  const fresh = h('button', { type: 'button', text: 'New session' });
  fresh.addEventListener('click', () => {
    session = newSession();
    sessionLabel.textContent = session;
    clear(log);
    tree.reset();
  });
  app.append(
    h(
      'main',
      { class: 'layout chat' },
      h('section', { class: 'card' }, h('div', { class: 'session' }, 'Session ', sessionLabel, ' ', fresh), log, composer, status, errors, configPanel === undefined ? null : h('details', { class: 'config' }, h('summary', { text: 'Configuration' }), configPanel.element)),
      h('section', { class: 'card result' }, h('h2', { text: 'Steps of the last turn' }), tree.element),
    ),
  );
  void loadHistory();
}

void boot();
