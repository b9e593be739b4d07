// Operation error classes (pkg/volume/util/types): the generator tells them apart, and their
// names appear in every logged error text.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  TransientOperationFailure,
  UncertainProgressError,
  isOperationFinishedError,
  isUncertainProgressError,
} from '../../../../src/volume/util/errors.js';

describe('operation error classes', () => {
  it('a logged error names its class', () => {
    assert.equal(String(new TransientOperationFailure('driver not registered')), 'TransientOperationFailure: driver not registered');
    assert.equal(String(new UncertainProgressError('timeout')), 'UncertainProgressError: timeout');
  });

  it('only an error that is neither uncertain nor transient is finished', () => {
    assert.equal(isOperationFinishedError(new TransientOperationFailure('x')), false);
    assert.equal(isOperationFinishedError(new UncertainProgressError('x')), false);
    assert.equal(isOperationFinishedError(new Error('x')), true);
    assert.equal(isUncertainProgressError(new UncertainProgressError('x')), true);
    assert.equal(isUncertainProgressError(new TransientOperationFailure('x')), false);
  });
});
