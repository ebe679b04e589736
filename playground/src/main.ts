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
import { ApiError, apiKey, durableStream, getJson, joinRun, RunStopped, setApiKey, type RunCallbacks, type RunView } from './api.js';
import { clear, h } from './dom.js';
import { SchemaForm } from './form.js';
import { markdown } from './markdown.js';
import { mergeChunk, RunTree, type StreamEvent } from './runs.js';
import { inSchemaOrder, validate, type Issue, type Schema } from './schema.js';

interface ChainInfo {
  path: string;
  description: string;
  playground: 'default' | 'chat';
  /** The chain serves `{path}/c/{hash}/playground/` (its config can live in the address). */
  configHashes?: boolean;
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
/** The server could not keep the run apart from its connection (Redis is down): it runs as a plain stream. */
const NOT_DURABLE = 'Running… (Redis is unavailable: this run ends if the connection drops)';
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
/** A share link's part: its value, and whether it was there but could not be read (a link cut short, edited by hand). */
const decodeShared = (text: string | null | undefined): { value: unknown; broken: boolean } => {
  const value = decode(text);
  return { value, broken: Boolean(text) && value === undefined };
};
/** What the status says after a Stop that reached the server. */
const STOPPED = 'Stopped';

const app = document.getElementById('app') as HTMLElement;

function notice(text: string): HTMLElement {
  return h('div', { class: 'notice', attrs: { role: 'status' }, text });
}

/**
 * `render` at most once an animation frame, however many stream chunks ask for it; `flush` renders at once if
 * a render is waiting. Chunks can arrive thousands at a time (a fast model, a rejoin that replays a run's
 * frames in one burst), and the whole output rendered again for each took 47 s for an answer of 30,000 tokens
 * that the server had streamed in 1 s.
 */
function perFrame(render: () => void): { schedule(): void; flush(): void } {
  let pending = false;
  const flush = (): void => {
    if (!pending) return;
    pending = false;
    render();
  };
  return {
    schedule: () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(flush);
    },
    flush,
  };
}

/** A chain's output rendered as `as` says (markdown, text, json): an object's fields each under its name. */
function renderValue(value: unknown, as: string, outputSchema: Schema | undefined): Node[] {
  if (typeof value === 'string') return [as === 'markdown' ? markdown(value) : as === 'text' ? h('pre', { class: 'text-output', dir: 'auto', text: value }) : h('pre', { class: 'json-output', text: JSON.stringify(value, null, 2) })];
  const shown = outputSchema === undefined ? value : inSchemaOrder(value, outputSchema, outputSchema);
  if (as === 'json' || shown === null || typeof shown !== 'object' || Array.isArray(shown)) return [h('pre', { class: 'json-output', text: JSON.stringify(shown, null, 2) })];
  // Text or Markdown for an object (`/rag`: answer and sources): each field under its name, its text as asked.
  return Object.entries(shown as Record<string, unknown>).map(([key, field]) =>
    h('div', { class: 'output-part' }, h('div', { class: 'io-label', text: key }), ...renderValue(field, typeof field === 'string' ? as : 'json', undefined)),
  );
}

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
  // Once it is on the page: the key is what the person has to type next.
  requestAnimationFrame(() => input.focus());
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

/**
 * The configuration of the address's `/c/{config}/` part: its settings the chain has, the names of those it
 * does not (the server would drop them, and no field could show or clear them: left out, and said), and whether
 * the part was there but could not be read.
 */
function readSharedConfig(configSchema: Schema): { config: { configurable?: Record<string, unknown> } | undefined; unknown: string[]; broken: boolean } {
  const part = decodeShared(shared?.[1]);
  const config = part.value as { configurable?: Record<string, unknown> } | undefined;
  const knownSettings = new Set(Object.keys(configSchema.properties?.configurable?.properties ?? {}));
  const settings = config?.configurable;
  const unknown = settings !== null && typeof settings === 'object' && !Array.isArray(settings) ? Object.keys(settings).filter((key) => !knownSettings.has(key)) : [];
  if (unknown.length > 0 && config !== undefined) {
    config.configurable = Object.fromEntries(Object.entries(settings as Record<string, unknown>).filter(([key]) => knownSettings.has(key)));
  }
  return { config, unknown, broken: part.broken };
}

/** The notice for a shared configuration's settings the chain does not have. */
const unknownSettingsNotice = (names: string[]): HTMLElement =>
  notice(`This link's configuration has settings this chain does not have (${names.join(', ')}): they were left out.`);

/** The setup a config asks for, checked as the server will (a share link's value can be anything). */
const settingIssues = (config: unknown, configSchema: Schema): Issue[] =>
  validate(config, configSchema, configSchema)
    .filter((issue) => issue.path[0] === 'configurable')
    .map((issue) => ({ ...issue, path: issue.path.slice(1) }));

function runPage(inputSchema: Schema, configSchema: Schema, outputSchema: Schema | undefined): void {
  const { config: sharedConfig, unknown: unknownSettings, broken: sharedConfigBroken } = readSharedConfig(configSchema);
  const sharedInputPart = decodeShared(new URLSearchParams(location.hash.slice(1)).get('input'));
  const sharedInput = sharedInputPart.value;
  const syncUrl = (): void => {
    const config = configPanel === undefined ? {} : { configurable: configPanel.value };
    // Without config hashes the chain has no `/c/…/playground/`: the address keeps the input only.
    const page = info.configHashes === false ? 'playground/' : `c/${encode(config)}/playground/`;
    const target = new URL(`${CHAIN}${page}#input=${encode(form.value)}`, location.href);
    history.replaceState(null, '', target.href);
    // The address now holds a link that reads: a notice about the one before is out of date.
    configUnread = false;
    clear(linkNotice);
  };
  /** The address's config part could not be read (until the address is rewritten). */
  let configUnread = false;
  const jsonArea = h('textarea', { class: 'json', rows: 8, attrs: { 'aria-label': 'Input as JSON' } });
  const jsonIssues = h('div', { class: 'json-issues' });
  /** The JSON tab holds text that is not JSON: the form keeps the last value that was, and Run waits for a fix. */
  let jsonBroken = false;
  const JSON_BROKEN = 'The JSON input is not valid JSON: fix it, or edit the form';
  const status = h('span', { class: 'status', attrs: { role: 'status' } });
  const form = new SchemaForm({ ...inputSchema, title: '' }, sharedInput, (value) => {
    jsonArea.value = JSON.stringify(value, null, 2);
    jsonBroken = false;
    if (status.textContent === JSON_BROKEN) status.textContent = '';
    clear(jsonIssues);
    syncUrl();
  });
  const configPanel = configForm(configSchema, sharedConfig?.configurable, syncUrl);
  jsonArea.value = JSON.stringify(form.value, null, 2);
  jsonArea.addEventListener('input', () => {
    clear(jsonIssues);
    try {
      const value = JSON.parse(jsonArea.value) as unknown;
      jsonBroken = false;
      const issues = validate(value, inputSchema, inputSchema);
      for (const issue of issues) jsonIssues.append(h('div', { class: 'field-error', text: `${issue.path.join('.') || 'input'}: ${issue.message}` }));
      form.setValue(value);
      syncUrl();
      // The Run that found it broken said so: fixed now, that status is stale.
      if (status.textContent === JSON_BROKEN) status.textContent = '';
    } catch (error) {
      jsonBroken = true;
      jsonIssues.append(h('div', { class: 'field-error', text: `Not JSON: ${(error as Error).message}` }));
    }
  });
  const configIssues = (config: unknown): Issue[] => settingIssues(config, configSchema);

  const formTab = h('button', { type: 'button', class: 'tab active', text: 'Form' });
  const jsonTab = h('button', { type: 'button', class: 'tab', text: 'JSON' });
  const jsonPane = h('div', { class: 'pane', hidden: true }, jsonArea, jsonIssues);
  const formPane = h('div', { class: 'pane' }, form.element);
  const selectTab = (json: boolean): void => {
    formTab.classList.toggle('active', !json);
    jsonTab.classList.toggle('active', json);
    formTab.setAttribute('aria-pressed', String(!json));
    jsonTab.setAttribute('aria-pressed', String(json));
    formPane.hidden = json;
    jsonPane.hidden = !json;
  };
  selectTab(false);
  formTab.addEventListener('click', () => selectTab(false));
  jsonTab.addEventListener('click', () => {
    selectTab(true);
    // Text being fixed stays as it is; otherwise the tab shows the form's value.
    if (!jsonBroken) jsonArea.value = JSON.stringify(form.value, null, 2);
  });

  const runButton = h('button', { type: 'button', class: 'primary', text: 'Run' });
  const stopButton = h('button', { type: 'button', text: 'Stop', disabled: true });
  const shareButton = h('button', { type: 'button', text: 'Copy share link' });
  const mode = h('select', { attrs: { 'aria-label': 'Render output as' } }, ...['auto', 'text', 'markdown', 'json'].map((m) => h('option', { value: m, text: m })));
  const output = h('div', { class: 'output', attrs: { 'data-testid': 'output' } });
  const errors = h('div', { class: 'errors' });
  /** What the address's share link could not give (shown until another link, or a run, replaces it). */
  const linkNotice = h('div', { class: 'link-notice' });
  const tree = new RunTree();
  let current: unknown;
  let controller: AbortController | undefined;
  /** Runs followed so far: a reload's question that a run started (and maybe ended) overtook leaves it be. */
  let follows = 0;

  const renderOutput = (): void => {
    clear(output);
    if (current === undefined) return;
    const as = mode.value === 'auto' ? (typeof current === 'string' ? 'markdown' : 'json') : mode.value;
    output.append(...renderValue(current, as, outputSchema));
  };
  const outputFrames = perFrame(renderOutput);
  mode.addEventListener('change', renderOutput);
  shareButton.addEventListener('click', () => {
    syncUrl();
    void navigator.clipboard?.writeText(location.href).then(
      () => (status.textContent = 'Share link copied'),
      () => (status.textContent = 'The address bar holds the share link'),
    );
  });

  const run = async (): Promise<void> => {
    if (controller !== undefined) return;
    if (jsonBroken) {
      selectTab(true);
      jsonArea.focus();
      status.textContent = JSON_BROKEN;
      return;
    }
    const input = form.value;
    const issues = validate(input, inputSchema, inputSchema);
    form.showIssues(issues);
    clear(errors);
    clear(linkNotice);
    const config = configPanel === undefined ? {} : { configurable: configPanel.value };
    const badConfig = configPanel === undefined ? [] : configIssues(config);
    configPanel?.showIssues(badConfig);
    if (issues.length > 0 || badConfig.length > 0) {
      status.textContent = 'Fix the highlighted fields';
      return;
    }
    await follow((signal, on) =>
      durableStream(CHAIN, 'stream_events', { input, config }, signal, {
        ...on,
        // A reload while it runs follows this run again (see resumeRun).
        onRunId: (runId) => sessionStorage.setItem(RUN_KEY, JSON.stringify({ runId, input })),
      }),
    );
  };

  /** Where this tab keeps the run under way: its id and its input. */
  const RUN_KEY = `runnel:run:${info.path}`;

  /** Follows a run — started, or rejoined after a reload — into the output and the steps. */
  const follow = async (stream: (signal: AbortSignal, on: RunCallbacks) => Promise<void>): Promise<void> => {
    follows++;
    const mine = (controller = new AbortController());
    // Run is disabled while the run goes: the keyboard's place moves to Stop, and comes back after.
    focusBack = document.activeElement === runButton;
    runButton.disabled = true;
    stopButton.disabled = false;
    if (focusBack) stopButton.focus();
    status.textContent = 'Running…';
    current = undefined;
    renderOutput();
    tree.reset();
    const started = performance.now();
    let plainRun = false;
    try {
      await stream(controller.signal, {
        onFrame: ({ event, data }) => {
          if (event !== 'data') return;
          const e = data as StreamEvent;
          tree.add(e);
          if (e.run_id === tree.rootId) {
            if (e.event === 'on_chain_stream') current = mergeChunk(current, e.data?.chunk);
            if (e.event === 'on_chain_end' && e.data?.output !== undefined) current = e.data.output;
            outputFrames.schedule();
          }
        },
        onReconnecting: () => {
          status.textContent = RECONNECTING;
          tree.reconnected();
        },
        onReconnected: () => (status.textContent = 'Running…'),
        onNotDurable: () => {
          status.textContent = NOT_DURABLE;
          plainRun = true;
        },
        // (Heard late when Stop came before the run's id: only while this run is the page's.)
        onCancelWaiting: () => {
          if (controller === mine) status.textContent = 'Stopping… (waiting for the connection to send the cancel)';
        },
      });
      status.textContent = `Done in ${Math.round(performance.now() - started)} ms${plainRun ? ' (as a plain stream: Redis is unavailable)' : ''}`;
    } catch (error) {
      // The cancel's answer says how the run ended: it may have finished before the cancel reached it.
      const finished = controller.signal.aborted && error instanceof RunStopped && error.run?.status === 'success';
      // Steps a Stop cut short say stopped; a run that failed marks the steps still open failed.
      tree.stopAll(finished ? 'finished' : controller.signal.aborted ? 'stopped' : 'failed');
      if (controller.signal.aborted) {
        if (finished) {
          current = error.run?.output;
          renderOutput();
        }
        status.textContent = finished ? 'Finished before the stop reached the server' : error instanceof RunStopped && error.unreachable ? 'Stopped here; the cancel could not reach the server' : STOPPED;
      } else {
        status.textContent = 'Failed';
        errors.append(errorBox(error));
        if (error instanceof ApiError) form.showIssues(serverIssues(error));
        if (error instanceof ApiError && error.status === 401) errors.append(keyPanel(() => void run()));
      }
    } finally {
      outputFrames.flush();
      sessionStorage.removeItem(RUN_KEY);
      tree.render();
      // Back to Run only when the keyboard was on Run or Stop (Stop, disabled once clicked, leaves it nowhere),
      // never pulling the page away from what the person went on to read.
      const back = document.activeElement === stopButton || (focusBack && document.activeElement === document.body);
      runButton.disabled = false;
      stopButton.disabled = true;
      controller = undefined;
      if (back) runButton.focus({ preventScroll: true });
    }
  };
  /**
   * After a reload (a probe: the output was gone, and the run went on unseen, unstoppable): the run this tab
   * had under way, if it still goes on, is followed again from its first frame, its input back in the form;
   * one that ended meanwhile shows its output.
   */
  const resumeRun = async (): Promise<void> => {
    const pending = ((): { runId?: unknown; input?: unknown } | null => {
      try {
        return JSON.parse(sessionStorage.getItem(RUN_KEY) ?? 'null') as { runId?: unknown; input?: unknown } | null;
      } catch {
        return null;
      }
    })();
    sessionStorage.removeItem(RUN_KEY);
    const runId = pending?.runId;
    if (typeof runId !== 'string' || controller !== undefined) return;
    const before = follows;
    const record = await getJson<RunView>(url(`runs/${encodeURIComponent(runId)}`)).catch(() => undefined);
    // A run the person started meanwhile, under way or ended, is the one the page shows (its input is in the form).
    if (record === undefined || follows !== before) return;
    if (pending?.input !== undefined) {
      form.setValue(pending.input);
      jsonArea.value = JSON.stringify(form.value, null, 2);
    }
    if (record.status === 'running' || record.status === 'pending') {
      sessionStorage.setItem(RUN_KEY, JSON.stringify(pending));
      await follow((signal, on) => joinRun(CHAIN, runId, signal, on));
    } else if (record.status === 'success') {
      current = record.output;
      renderOutput();
      status.textContent = 'Finished while the page reloaded';
    }
  };

  /** The keyboard was on Run or Stop when the run started or was stopped: it goes back to Run at the end. */
  let focusBack = false;
  runButton.addEventListener('click', () => void run());
  stopButton.addEventListener('click', () => {
    if (controller === undefined) return;
    focusBack ||= document.activeElement === stopButton;
    // The run lives on the server until it is cancelled there: say so until the server has answered.
    stopButton.disabled = true;
    status.textContent = 'Stopping…';
    controller.abort();
  });
  // A link pasted over this one with only its input changed (`#input=…`) loads that input.
  window.addEventListener('hashchange', () => {
    const next = decodeShared(new URLSearchParams(location.hash.slice(1)).get('input'));
    // The notice is about the link in the address: a good one (or none) replaces it.
    clear(linkNotice);
    if (next.broken) linkNotice.append(notice("This link's input could not be read (the link may be cut short): the input is unchanged."));
    if (configUnread) linkNotice.append(notice("This link's configuration could not be read (the link may be cut short): the defaults are shown instead."));
    if (next.value === undefined) return;
    form.setValue(next.value);
    jsonArea.value = JSON.stringify(form.value, null, 2);
    jsonBroken = false;
    clear(jsonIssues);
  });
  configUnread = sharedConfigBroken;
  if (sharedConfigBroken || sharedInputPart.broken) {
    linkNotice.append(notice(`This link's ${sharedConfigBroken ? (sharedInputPart.broken ? 'configuration and input' : 'configuration') : 'input'} could not be read (the link may be cut short): the defaults are shown instead.`));
  }
  // A shared configuration the chain would refuse shows on its fields now, not as an error after Run.
  if (configPanel !== undefined && sharedConfig !== undefined) configPanel.showIssues(configIssues({ configurable: configPanel.value }));
  // The address holds the setup from the start (a link that could not be read stays as it was, to be looked at).
  if (!sharedConfigBroken && !sharedInputPart.broken) syncUrl();
  if (unknownSettings.length > 0) linkNotice.append(unknownSettingsNotice(unknownSettings));

  const inputCard = h(
    'section',
    { class: 'card input' },
    h('h2', { text: 'Input' }),
    h('div', { class: 'tabs' }, formTab, jsonTab),
    formPane,
    jsonPane,
    configPanel === undefined ? null : h('details', { class: 'config', open: true }, h('summary', { text: 'Configuration' }), configPanel.element),
    h('div', { class: 'actions' }, runButton, stopButton, shareButton, status),
  );
  // Ctrl+Enter (⌘+Enter) anywhere in the input runs it, as in a code playground.
  inputCard.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey) && !event.isComposing) {
      event.preventDefault();
      void run();
    }
  });
  runButton.title = 'Run (Ctrl+Enter)';
  app.append(h('main', { class: 'layout' }, inputCard, h('section', { class: 'card result' }, h('h2', {}, 'Output ', mode), linkNotice, errors, output, h('h2', { text: 'Steps' }), tree.element)));
  void resumeRun();
}

function chatPage(inputSchema: Schema, configSchema: Schema): void {
  const storageKey = `runnel:session:${info.path}`;
  const newSession = (): string => {
    const id = crypto.randomUUID();
    localStorage.setItem(storageKey, id);
    return id;
  };
  // A shared `/c/{config}/playground/` link opens its session with its settings (the README's /chat example
  // links one); the address then holds the page's setup as it changes, session included, as a run page's does.
  const { config: sharedConfig, unknown: unknownSettings, broken: sharedConfigBroken } = readSharedConfig(configSchema);
  const sessionSchema = configSchema.properties?.configurable?.properties?.session_id;
  const sharedSession = sharedConfig?.configurable?.session_id;
  const linkSession =
    typeof sharedSession === 'string' && (sessionSchema === undefined || validate(sharedSession, sessionSchema, configSchema).length === 0) ? sharedSession : undefined;
  // Not kept as this tab's own session: a link does not replace the visitor's conversation (nor, opened once,
  // write every later visit into a session its author chose).
  let session = linkSession ?? localStorage.getItem(storageKey) ?? newSession();
  const syncUrl = (): void => {
    // Without config hashes the chain has no `/c/…/playground/` page.
    if (info.configHashes === false) return;
    const config = { configurable: { ...((configPanel?.value as Record<string, unknown>) ?? {}), session_id: session } };
    history.replaceState(null, '', new URL(`${CHAIN}c/${encode(config)}/playground/`, location.href).href);
  };
  // The input's text field: the one string property (`message`, `input`, `question`, ...).
  const messageKey = Object.entries(inputSchema.properties ?? {}).find(([, s]) => s.type === 'string')?.[0] ?? 'input';
  const log = h('div', { class: 'chat-log', attrs: { 'aria-live': 'polite' } });
  const text = h('textarea', { rows: 2, placeholder: 'Message', dir: 'auto', attrs: { 'aria-label': 'Message' } });
  const sendButton = h('button', { type: 'submit', class: 'primary', text: 'Send' });
  const stopButton = h('button', { type: 'button', text: 'Stop', disabled: true });
  const sessionLabel = h('code', { class: 'session-id', text: session });
  const errors = h('div', { class: 'errors' });
  const status = h('div', { class: 'status', attrs: { role: 'status' } });
  const tree = new RunTree();
  const sharedSettings = { ...(sharedConfig?.configurable ?? {}) };
  delete sharedSettings.session_id;
  // Without a link's settings, the form starts from the schema's defaults (an empty object would clear them).
  const configPanel = configForm(configSchema, sharedConfig?.configurable === undefined ? undefined : sharedSettings, syncUrl, ['session_id']);
  let controller: AbortController | undefined;
  /** Turns sent so far: a reload's question that a turn overtook (under way or ended) leaves it be. */
  let turns = 0;
  const linkNotice = h('div', { class: 'link-notice' });
  if (sharedConfigBroken) linkNotice.append(notice("This link's configuration could not be read (the link may be cut short): this tab's session and the defaults are used instead."));
  else if (typeof sharedSession === 'string' && linkSession === undefined) linkNotice.append(notice(`This link's session id is not one this chain takes (${sessionSchema?.description ?? 'session_id'}): this tab's session is used instead.`));
  if (unknownSettings.length > 0) linkNotice.append(unknownSettingsNotice(unknownSettings));
  const settingsBox = configPanel === undefined ? null : h('details', { class: 'config', open: Object.keys(sharedSettings).length > 0 }, h('summary', { text: 'Configuration' }), configPanel.element);
  /** The settings of the panel, checked as the server will: shown on their fields (the panel opened); true when none is wrong. */
  const settingsFit = (): boolean => {
    if (configPanel === undefined || settingsBox === null) return true;
    // Checked as they will be sent: with the page's session.
    const issues = settingIssues({ configurable: { ...(configPanel.value as Record<string, unknown>), session_id: session } }, configSchema);
    configPanel.showIssues(issues);
    if (issues.length > 0) settingsBox.open = true;
    return issues.length === 0;
  };
  // A shared setting the chain would refuse shows on its field now (its panel open), not as an error after Send.
  if (sharedConfig !== undefined) settingsFit();

  const makeBubble = (role: string, content: string): HTMLElement => {
    // dir=auto: a message in Hebrew or Arabic reads right to left (an answer's Markdown blocks each find their own).
    const el = h('div', { class: `bubble ${role === 'human' ? 'human' : 'ai'}`, dir: 'auto', attrs: { 'data-role': role } });
    el.append(role === 'human' ? document.createTextNode(content) : markdown(content));
    return el;
  };
  const bubble = (role: string, content: string): HTMLElement => {
    const el = makeBubble(role, content);
    log.append(el);
    log.scrollTop = log.scrollHeight;
    return el;
  };
  /** Bumped by New session: a history still loading for the session before is dropped when it arrives. */
  let loading = 0;
  const loadHistory = async (): Promise<void> => {
    const mine = ++loading;
    const of = session;
    clear(log);
    try {
      const history = await getJson<{ messages: { type: string; content: unknown }[] }>(url(`history/${encodeURIComponent(of)}`));
      if (mine !== loading || of !== session) return;
      // Before any turn sent while it loaded: the history is what came first.
      log.prepend(...history.messages.map((message) => makeBubble(message.type, typeof message.content === 'string' ? message.content : JSON.stringify(message.content))));
      log.scrollTop = log.scrollHeight;
    } catch (error) {
      if (mine !== loading || of !== session) return;
      if (!(error instanceof ApiError && error.status === 404)) errors.append(errorBox(error));
    }
  };

  const chat = async (): Promise<void> => {
    // One turn at a time: the session's history is written in order, and Stop stops the turn under way.
    if (controller !== undefined) return;
    clear(errors);
    const message = text.value.trim();
    if (message === '') return;
    const input = { [messageKey]: message };
    const issues = validate(input, inputSchema, inputSchema);
    if (issues.length > 0) {
      for (const issue of issues) errors.append(h('div', { class: 'field-error', text: `${issue.path.join('.')}: ${issue.message}` }));
      return;
    }
    // A setting the server would refuse: said on its field, and the message stays to be sent once it is fixed.
    if (!settingsFit()) {
      status.textContent = 'Fix the highlighted settings';
      return;
    }
    text.value = '';
    const config = { configurable: { ...((configPanel?.value as Record<string, unknown>) ?? {}), session_id: session } };
    const of = session;
    await turn(message, (signal, on) =>
      durableStream(CHAIN, 'stream_events', { input, config }, signal, {
        ...on,
        // A reload while the answer streams follows this run again (see resumeTurn).
        onRunId: (runId) => sessionStorage.setItem(TURN_KEY, JSON.stringify({ session: of, runId, message })),
      }),
    );
  };

  /** Where this tab keeps the turn under way: its session, its run and its message. */
  const TURN_KEY = `runnel:turn:${info.path}`;

  /** One turn: the message's bubble, the answer streaming into the next, Stop; `follow` runs or joins it. */
  const turn = async (message: string, follow: (signal: AbortSignal, on: RunCallbacks) => Promise<void>): Promise<boolean> => {
    const asked = bubble('human', message);
    const answer = bubble('ai', '');
    answer.classList.add('streaming');
    let content: unknown;
    const show = (): void => {
      // The log follows the answer down only from its bottom: a reader who scrolled up (an earlier turn, the
      // answer's start) stays there. A probe: each frame set it to the end, pulling them back many times a second.
      const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 8;
      clear(answer);
      answer.append(typeof content === 'string' ? markdown(content) : h('pre', { text: JSON.stringify(content, null, 2) }));
      if (atBottom) log.scrollTop = log.scrollHeight;
    };
    const answerFrames = perFrame(show);
    turns++;
    const mine = (controller = new AbortController());
    sendButton.disabled = true;
    stopButton.disabled = false;
    // A new session starts once this turn has ended (or been stopped).
    fresh.disabled = true;
    tree.reset();
    let answered = false;
    /** Whether the server answered anything of this turn. */
    let heard = false;
    try {
      await follow(controller.signal, {
        onFrame: ({ event, data }) => {
          heard = true;
          if (event !== 'data') return;
          const e = data as StreamEvent;
          tree.add(e);
          if (e.run_id === tree.rootId && e.event === 'on_chain_stream') {
            content = mergeChunk(content, e.data?.chunk);
            answerFrames.schedule();
          }
        },
        onReconnecting: () => {
          status.textContent = RECONNECTING;
          tree.reconnected();
        },
        onReconnected: () => (status.textContent = ''),
        onNotDurable: () => (status.textContent = NOT_DURABLE),
        onCancelWaiting: () => {
          if (controller === mine) status.textContent = 'Stopping… (waiting for the connection to send the cancel)';
        },
      });
      status.textContent = '';
      answered = true;
    } catch (error) {
      const stopped = mine.signal.aborted;
      const run = error instanceof RunStopped ? error.run : undefined;
      tree.stopAll(stopped && run?.status === 'success' ? 'finished' : stopped ? 'stopped' : 'failed');
      if (stopped && run?.status === 'success') {
        // It finished before the cancel reached it: the whole answer is in the conversation, and shown here.
        content = run.output;
        show();
        status.textContent = 'The answer was finished before the stop reached the server';
        answered = true;
      } else {
        // Sent with the browser offline, the turn never left it (a probe: "Failed to fetch", and a note that
        // the server might answer it).
        const unsent = !stopped && !(error instanceof ApiError) && !heard && navigator.onLine === false;
        if (!stopped) errors.append(unsent ? h('div', { class: 'error', text: 'Not sent: this browser is offline. Send it again once it is back online.' }) : errorBox(error));
        // A key the server no longer takes: asked for again, as the run page asks (the message stays to send).
        if (!stopped && error instanceof ApiError && error.status === 401) errors.append(keyPanel(() => clear(errors)));
        status.textContent = stopped ? (error instanceof RunStopped && error.unreachable ? 'Stopped here; the cancel could not reach the server' : STOPPED) : '';
        answer.classList.add('failed');
        // An answer with nothing in it is not shown: the note says what became of the turn.
        const shown = content === undefined ? asked : answer;
        if (content === undefined) answer.remove();
        // Only answered turns are kept. Said when the server said so — the run failed, or its cancel was
        // answered — not when the page lost sight of it (offline, a cancel that never got through).
        const notKept = stopped ? run?.status === 'cancelled' || run?.status === 'error' : error instanceof ApiError || unsent;
        if (notKept) {
          asked.classList.add('not-kept');
          answer.classList.add('not-kept');
          shown.after(h('div', { class: 'turn-note', text: `${stopped ? 'Stopped' : unsent ? 'Not sent' : 'Failed'}: this turn is not kept in the conversation.` }));
          if (text.value === '') text.value = message;
        } else {
          shown.after(h('div', { class: 'turn-note', text: 'This turn may still be answered on the server: reload to see the conversation as the server keeps it.' }));
        }
      }
    } finally {
      answerFrames.flush();
      sessionStorage.removeItem(TURN_KEY);
      answer.classList.remove('streaming');
      tree.render();
      sendButton.disabled = false;
      stopButton.disabled = true;
      fresh.disabled = false;
      controller = undefined;
    }
    return answered;
  };

  /**
   * After a reload: the turn this tab had under way, if its run still goes on, is followed again from its
   * first frame; once it is answered, the conversation is shown as the server now has it.
   */
  const resumeTurn = async (): Promise<void> => {
    const pending = ((): { session?: unknown; runId?: unknown; message?: unknown } | null => {
      try {
        return JSON.parse(sessionStorage.getItem(TURN_KEY) ?? 'null') as { session?: unknown; runId?: unknown; message?: unknown } | null;
      } catch {
        return null;
      }
    })();
    const runId = pending?.runId;
    const message = pending?.message;
    if (pending?.session !== session || typeof runId !== 'string' || typeof message !== 'string') {
      sessionStorage.removeItem(TURN_KEY);
      return;
    }
    const before = turns;
    const run = await getJson<RunView>(url(`runs/${encodeURIComponent(runId)}`)).catch(() => undefined);
    // Ended: its answer is in the history already (or it was not kept). Unknown: nothing to follow.
    if (run === undefined || (run.status !== 'running' && run.status !== 'pending')) {
      sessionStorage.removeItem(TURN_KEY);
      return;
    }
    // A turn sent meanwhile (under way or ended) is the one shown; a session started meanwhile is not this turn's.
    if (turns !== before || pending.session !== session) return;
    if (await turn(message, (signal, on) => joinRun(CHAIN, runId, signal, on))) await loadHistory();
  };

  const composer = h('form', { class: 'composer' }, text, sendButton, stopButton);
  composer.addEventListener('submit', (event) => {
    event.preventDefault();
    void chat();
  });
  text.addEventListener('keydown', (event) => {
    // Not while an input method composes (Enter picks a word there).
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
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
    // A history still loading is for the session before.
    loading++;
    sessionLabel.textContent = session;
    clear(linkNotice);
    syncUrl();
    clear(log);
    clear(errors);
    status.textContent = '';
    tree.reset();
  });
  app.append(
    h(
      'main',
      { class: 'layout chat' },
      h('section', { class: 'card' }, h('div', { class: 'session' }, 'Session ', sessionLabel, ' ', fresh), linkNotice, log, composer, status, errors, settingsBox),
      h('section', { class: 'card result' }, h('h2', { text: 'Steps of the last turn' }), tree.element),
    ),
  );
  // The address holds the setup from the start (a link that could not be read stays as it was, to be looked at).
  if (!sharedConfigBroken) syncUrl();
  void loadHistory().then(resumeTurn);
}

void boot();
