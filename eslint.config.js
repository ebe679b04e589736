// Lint rules, including the direction of imports (STYLE.md, "The house"):
// chains → src public API; routes → src/server → core; nothing in src/core
// reaches outside it; building blocks never import the server.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const outsideCore = {
  patterns: [{ group: ['../*', '!../core', '!../core/*'], message: 'src/core imports nothing of ours outside src/core.' }],
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'scratch/**', 'playground/dist/**', 'test/artifacts/**', '.runnel/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', outsideCore],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/core/**', 'src/server/**', 'src/client/**', 'src/index.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/server/*', '**/server', '**/routes/*', '**/chains/*'], message: 'Building blocks never import the server, routes or chains.' }] },
      ],
    },
  },
  {
    files: ['chains/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/routes/*', '../src/*/*', '../src/*/**'], message: 'Chains import the public API (src/index.ts), never routes or internals.' }] },
      ],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
