import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isReDoSProne } from '../../../src/lockfile/redos.ts';

describe('isReDoSProne', () => {
  const prone = [
    '(a+)+',
    '(a*)*',
    '(a|b*)+',
    '^(\\w+\\s?)*$',
    '((a+))+',
    '(?:x|y+)*',
    '(?<word>a+)+',
    '(x{1,3})*',
    '(a+){2,}',
    '((a+)?)+',
    '(a+)+?',
  ];
  const safe = [
    '^node-(20|22|24)$',
    'a+b*c?',
    '(ab)+',
    '(a?)+',
    '(\\d{3})+',
    '(a+)?',
    '(a+){3}',
    '[(a+)+]',
    '\\(a+\\)+',
    '\\p{L}+',
    '(?=a+)b',
    '^release/.*$',
  ];

  for (const source of prone) {
    it(`flags ${source}`, () => assert.equal(isReDoSProne(source), true));
  }
  for (const source of safe) {
    it(`accepts ${source}`, () => assert.equal(isReDoSProne(source), false));
  }
});
