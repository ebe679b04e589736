/**
 * What a backend developer's own clients read from the answers the route
 * tests check in process: curl and Python's http.client, against a
 * listening server. A method a path does not take is a 405 that names the
 * methods it does (`allow`); a `/batch` with bad inputs is one 422 listing
 * each; a config hash that does not decode is a 400 on every route under it.
 */
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/server.js';

let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

function run(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { maxBuffer: 1 << 20, timeout: 60_000 }, (error, stdout, stderr) => {
      if (error !== null) reject(new Error(`${file} failed: ${error.message} ${stderr}`));
      else resolve(stdout);
    });
  });
}

interface Answer {
  status: number;
  allow?: string;
  body: Record<string, unknown>;
}

/** curl's view: the status line's code, the `allow` header and the JSON body. */
async function curl(method: string, path: string, body?: string): Promise<Answer> {
  const args = ['-sS', '-X', method, '-D', '-', `${server.url}${path}`];
  if (body !== undefined) args.push('-H', 'content-type: application/json', '--data-binary', body);
  const out = await run('curl', args);
  const [head = '', ...rest] = out.split('\r\n\r\n');
  const status = Number(/^HTTP\/[\d.]+ (\d{3})/.exec(head)?.[1]);
  const allow = /^allow: (.*)$/im.exec(head)?.[1]?.trim();
  return { status, allow, body: JSON.parse(rest.join('\r\n\r\n')) as Record<string, unknown> };
}

/** Python's http.client: each request on its own connection; what it read back, as JSON. */
const PYTHON = `
import http.client, json, sys
from urllib.parse import urlsplit
url = urlsplit(sys.argv[1])
answers = []
for method, path, body in json.loads(sys.argv[2]):
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    headers = {'content-type': 'application/json'} if body is not None else {}
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    answers.append({'status': response.status, 'allow': response.getheader('allow'), 'body': json.loads(response.read())})
    connection.close()
print(json.dumps(answers))
`;

async function python(requests: [string, string, string | null][]): Promise<Answer[]> {
  return (JSON.parse(await run('python3', ['-c', PYTHON, server.url, JSON.stringify(requests)])) as (Answer & { allow: string | null })[]).map((answer) => ({
    ...answer,
    allow: answer.allow ?? undefined,
  }));
}

describe('answers as curl and http.client read them', () => {
  it('405 with allow for a method a path does not take, on every kind of route', async () => {
    const cases: [string, string, string][] = [
      ['DELETE', '/joke/runs', 'GET, HEAD, POST'],
      ['POST', '/healthz', 'GET, HEAD'],
      ['POST', '/openapi.json', 'GET, HEAD'],
      ['GET', '/joke/invoke', 'POST'],
      ['PUT', '/joke/input_schema', 'GET, HEAD'],
    ];
    const byPython = await python(cases.map(([method, path]) => [method, path, null]));
    for (const [i, [method, path, allow]] of cases.entries()) {
      for (const answer of [await curl(method, path), byPython[i] as Answer]) {
        expect(answer.status, `${method} ${path}`).toBe(405);
        expect(answer.allow, `${method} ${path}`).toBe(allow);
        expect(answer.body.code).toBe('RUNNEL_ERR_METHOD_NOT_ALLOWED');
      }
    }
    // A path nothing takes stays 404.
    expect((await curl('DELETE', '/nowhere')).status).toBe(404);
  });

  it('one 422 for a /batch with bad inputs, listing each by its place', async () => {
    const body = JSON.stringify({ inputs: [{ topic: 'cats' }, {}, { topic: 5 }] });
    const [byPython] = await python([['POST', '/joke/batch', body]]);
    for (const answer of [await curl('POST', '/joke/batch', body), byPython as Answer]) {
      expect(answer.status).toBe(422);
      expect(answer.body.code).toBe('RUNNEL_ERR_INPUT_INVALID');
      expect((answer.body.detail as { loc: unknown[] }[]).map((d) => d.loc)).toEqual([
        ['inputs', 1, 'topic'],
        ['inputs', 2, 'topic'],
      ]);
    }
  });

  it('400 for a config hash that does not decode, on the GET and POST routes under it', async () => {
    const requests: [string, string, string | null][] = [
      ['GET', '/joke/c/garbage!!/input_schema', null],
      ['POST', '/joke/c/garbage!!/invoke', JSON.stringify({ input: { topic: 'cats' } })],
    ];
    const byPython = await python(requests);
    for (const [i, [method, path, body]] of requests.entries()) {
      for (const answer of [await curl(method, path, body ?? undefined), byPython[i] as Answer]) {
        expect(answer.status, `${method} ${path}`).toBe(400);
        expect(answer.body.code).toBe('RUNNEL_ERR_CONFIG_HASH_INVALID');
      }
    }
  });
});
