import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', '.switchyard/**', 'bench/results/**', 'test-artifacts/**', 'bin/**', 'scratch/**', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      'no-empty': ['error', { allowEmptyCatch: false }],
      'max-lines': ['error', { max: 400, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // Statechart definitions are declarative data; one config object spans the whole chart.
    files: ['machines/**/*.machine.ts'],
    rules: { 'max-lines-per-function': 'off' },
  },
  {
    // The visualizer's browser scripts: plain classic scripts (modules cannot load from file://).
    files: ['visualize/public/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'script',
      globals: Object.fromEntries(
        ['window', 'document', 'location', 'history', 'sessionStorage', 'fetch', 'WebSocket', 'URL', 'URLSearchParams', 'Node', 'ELK', 'setTimeout', 'clearTimeout']
          .map((name) => [name, 'readonly']),
      ),
    },
  },
  {
    // node:test suites group many cases inside one describe() callback.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      'max-lines-per-function': 'off',
      '@typescript-eslint/no-floating-promises': 'off',
    },
  },
);
